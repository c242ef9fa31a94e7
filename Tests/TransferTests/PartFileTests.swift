// A worker's part file gathers the small chunks a socket hands over into large writes (each
// write is an operation at a network file server), and what it holds stays a prefix of the
// range: a part left behind is adopted from its size.
@testable import Transfer
import Foundation
@testable import TestSupport
import XCTest

final class PartFileTests: ScratchDirectoryTestCase {
    private func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
    }

    func testSmallChunksReachTheFileInLargeWritesAndStayAPrefix() throws {
        let path = scratch.appendingPathComponent("part").path
        let origin: Int64 = 8 << 20  // the range's first byte in the file's numbering
        let chunk = [UInt8](repeating: 0, count: 1000).enumerated().map { UInt8(truncatingIfNeeded: $0.offset) }
        var expected: [UInt8] = []
        do {
            let part = try PartFile(path: path, origin: origin)
            var offset = origin
            for _ in 0..<10 {
                try chunk.withUnsafeBytes { try part.write($0, at: offset) }
                offset += Int64(chunk.count)
                expected += chunk
            }
            XCTAssertEqual(size(path), 0, "ten 1000-byte chunks wait in the buffer")
            while expected.count <= PartFile.bufferSize {
                try chunk.withUnsafeBytes { try part.write($0, at: offset) }
                offset += Int64(chunk.count)
                expected += chunk
            }
            XCTAssertEqual(size(path), PartFile.bufferSize, "a full buffer is one write")
            try part.flush()
            XCTAssertEqual(size(path), expected.count)
            // A chunk that does not continue the buffered bytes (a retry elsewhere) is written
            // where it belongs.
            try chunk.withUnsafeBytes { try part.write($0, at: origin) }
            try part.sync()
            XCTAssertEqual(size(path), expected.count)
            // Dropped with bytes still buffered (a worker that stops): they are written too.
            try chunk.withUnsafeBytes { try part.write($0, at: offset) }
            expected += chunk
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(expected))
    }

    func testAWriteThatFailedStopsEveryLaterOne() throws {
        // /dev/full fails every write with ENOSPC: a failure the transfer's tick swallowed must
        // not let later bytes land past the ones that never did (a hole of zeros in a whole part).
        guard FileManager.default.isWritableFile(atPath: "/dev/full") else { throw XCTSkip("no /dev/full") }
        let part = try PartFile(path: "/dev/full", origin: 0)
        let chunk = [UInt8](repeating: 7, count: 1000)
        try chunk.withUnsafeBytes { try part.write($0, at: 0) }
        XCTAssertThrowsError(try part.flush(), "the buffered bytes cannot be written")
        XCTAssertThrowsError(try chunk.withUnsafeBytes { try part.write($0, at: 1000) }, "a later chunk is refused")
        XCTAssertThrowsError(try part.sync(), "and the part is never synced as whole")
    }
}
