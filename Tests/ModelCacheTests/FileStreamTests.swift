// FileIO.stream on a real file, through a buffered and an O_DIRECT descriptor: the staging
// file's hash reads go around the cache on a network or FUSE filesystem (StagingRecord), and
// O_DIRECT takes only reads aligned to the block size into aligned buffers.
import Foundation
import SharedFiles
@testable import TestSupport
import XCTest

final class FileStreamTests: ScratchDirectoryTestCase {
    func testStreamHandsOverExactlyTheAskedBytesThroughABufferedAndAnODirectDescriptor() throws {
        let size = (3 << 20) + 777
        var generator = SystemRandomNumberGenerator()
        let bytes = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let path = scratch.appendingPathComponent("file").path
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: bytes))
        let direct = open(path, O_RDONLY | O_CLOEXEC | FileIO.directFlag)
        guard direct >= 0 else { throw XCTSkip("this filesystem takes no O_DIRECT (errno \(errno)): \(scratch.path)") }
        let buffered = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(direct); close(buffered) }
        let cases: [(Int64, Int64?)] = [(0, nil), (1, nil), (4095, 4097), (4096, Int64(size)), (5000, Int64(size - 1)),
                                        ((1 << 20) + 3, (300 << 12) + 5), (Int64(size - 10), nil), (Int64(size), nil)]
        for (fd, kind) in [(buffered, "buffered"), (direct, "O_DIRECT")] {
            for (start, end) in cases {
                var got = Data()
                let result = FileIO.stream(fd, from: start, to: end) { got.append(contentsOf: $0); return true }
                let want = bytes[Int(start)..<Int(end ?? Int64(size))]
                XCTAssertNil(result.errno, "\(kind) \(start)..<\(end.map(String.init) ?? "end")")
                XCTAssertEqual(result.bytes, Int64(want.count), "\(kind) \(start)..<\(end.map(String.init) ?? "end")")
                XCTAssertEqual(got, Data(want), "\(kind) \(start)..<\(end.map(String.init) ?? "end")")
            }
        }
    }
}
