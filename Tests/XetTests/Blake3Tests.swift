import Foundation
import TestHub
import XCTest
@testable import Xet

/// BLAKE3 against the official test vectors (Data/blake3_test_vectors.json, BLAKE3-team/BLAKE3's
/// test_vectors/test_vectors.json as shipped in PyPI's `blake3` 1.0.11) and against `b3sum`.
final class Blake3Tests: XCTestCase {
    struct Vectors: Decodable {
        struct Case: Decodable {
            let input_len: Int
            let hash: String
            let keyed_hash: String
            let derive_key: String
        }
        let key: String
        let cases: [Case]
    }

    override func tearDown() {
        Blake3.forcePortable(false)
        super.tearDown()
    }

    func testOfficialVectorsWithExtendedOutputOnBothChunkLoops() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Data/blake3_test_vectors.json")
        let vectors = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
        XCTAssertEqual(vectors.cases.count, 22)
        let key = Array(vectors.key.utf8)
        for portable in [false, true] {
            Blake3.forcePortable(portable)
            for c in vectors.cases {
                let input = (0..<c.input_len).map { UInt8($0 % 251) }
                let outLength = c.hash.count / 2
                var plain = Blake3()
                plain.update(input)
                XCTAssertEqual(hex(plain.finalize(count: outLength)), c.hash, "hash of \(c.input_len) bytes, portable \(portable)")
                XCTAssertEqual(hex(plain.finalize()), String(c.hash.prefix(64)))
                var keyed = Blake3(key: key)
                keyed.update(input)
                XCTAssertEqual(hex(keyed.finalize(count: outLength)), c.keyed_hash, "keyed hash of \(c.input_len) bytes")
                // The vectors' context string, a constant as the file's comment asks.
                var derived = Blake3(deriveKeyContext: "BLAKE3 2019-12-27 16:29:52 test vectors context")
                derived.update(input)
                XCTAssertEqual(hex(derived.finalize(count: outLength)), c.derive_key, "derive_key of \(c.input_len) bytes")
                // The same input fed in uneven pieces.
                var pieces = Blake3(key: key)
                var offset = 0
                var step = 1
                while offset < input.count {
                    let end = min(input.count, offset + step)
                    pieces.update(input[offset..<end])
                    offset = end
                    step = step * 3 + 1
                }
                XCTAssertEqual(hex(pieces.finalize(count: outLength)), c.keyed_hash, "keyed hash of \(c.input_len) bytes in pieces")
            }
        }
    }

    /// Random inputs of lengths around the block (64) and chunk (1024) boundaries, and a few long
    /// ones that run the SIMD loop's 8-chunk batches, against b3sum and b3sum --keyed.
    func testRandomInputsAgreeWithB3sum() throws {
        let b3sum = "/usr/bin/b3sum"
        guard FileManager.default.isExecutableFile(atPath: b3sum) else {
            throw XCTSkip("b3sum is not installed (Debian package b3sum; scripts/test installs it)")
        }
        var lengths: Set<Int> = [0, 1, 2]
        for base in [64, 128, 1024, 2048, 3072, 8192, 9216, 16384, 17408, 65536] {
            for d in -2...2 { lengths.insert(base + d) }
        }
        lengths.formUnion([100_000, 1_048_576 + 1, 3 * 1_048_576 + 4097])
        var generator = SplitMix64(seed: 20261203)
        let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("blake3-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyFile = dir.appendingPathComponent("key")
        try Data(key).write(to: keyFile)
        var files: [(URL, [UInt8])] = []
        for length in lengths.sorted() {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let file = dir.appendingPathComponent("in-\(length)")
            try Data(bytes).write(to: file)
            files.append((file, bytes))
        }
        let plainSums = try run(b3sum, ["--no-names"] + files.map { $0.0.path }, stdin: nil)
        let keyedSums = try run(b3sum, ["--keyed", "--no-names"] + files.map { $0.0.path }, stdin: keyFile)
        XCTAssertEqual(plainSums.count, files.count)
        XCTAssertEqual(keyedSums.count, files.count)
        for (i, (_, bytes)) in files.enumerated() {
            var plain = Blake3()
            plain.update(bytes)
            XCTAssertEqual(hex(plain.finalize()), plainSums[i], "\(bytes.count) bytes")
            var keyed = Blake3(key: key)
            keyed.update(bytes)
            XCTAssertEqual(hex(keyed.finalize()), keyedSums[i], "\(bytes.count) bytes, keyed")
        }
    }

    private func run(_ tool: String, _ arguments: [String], stdin: URL?) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        if let stdin { process.standardInput = try FileHandle(forReadingFrom: stdin) }
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "\(tool) \(arguments.prefix(2))")
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}
