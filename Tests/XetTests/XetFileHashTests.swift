import TestHub
import XCTest
@testable import Xet

/// Whole-file Xet hashes against what the real client computes: the expected values are
/// `hf_xet.hash_files` (PyPI hf-xet 1.8.0) of the same bytes, facts checked in here so the test
/// needs no network; scripts/check-hub-fidelity compares with the latest hf_xet on every CI run.
final class XetFileHashTests: XCTestCase {
    /// xet-core's test data generator: SplitMix64 words, little-endian, cut to length.
    static func splitMixBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        return generator.bytes(count)
    }

    static func fileHash(_ bytes: [UInt8]) -> String {
        let lengths = bytes.withUnsafeBytes { ContentChunker.chunkLengths(of: $0) }
        var leaves: [MerkleLeaf] = []
        var offset = 0
        for length in lengths {
            leaves.append(MerkleLeaf(hash: XetHashing.chunkHash(bytes[offset..<(offset + length)]), length: UInt64(length)))
            offset += length
        }
        return MerkleTree.fileHash(of: leaves).hex
    }

    func testFileHashesEqualHfXets() {
        let expected: [(Int, String)] = [
            (1, "db14a713ab6ac9984dec4b58ec6b4cd80fb23a9e4d5cf47711b3e25b572e0f15"),
            (8191, "c9972474e2169b770d0595da498b63ce4ceb28b565bd5395121b648c0c0c8d6a"),
            (8192, "092549df2ade2842aaf826348895bc281d6ea61507857a40659ffa139d1e60ae"),
            (8193, "dae9a611062da0b461aab85e2a61d4bd646262421a028bfa0bf66de682a376aa"),
            (131_072, "c192e90f65eb8a8e18dc554fcb11697f884301cb1789ea401dfffe717abca740"),
            (131_073, "eebb9c2202901ba249894e16fdec34084d6c71a9608665f6b8acebf38cda57c5"),
            (1_000_000, "bbd7a795e3674155c7bd1a0c5ce67ff48408627391df945b272cefd7f13fdf33"),
            (3 * 1_048_576 + 7, "373f542b1d8c98f081619858308609c8a2ca07917e8483f09b30595bad74c416"),
        ]
        let random = Self.splitMixBytes(3 * 1_048_576 + 7, seed: 1)
        for (count, hash) in expected {
            XCTAssertEqual(Self.fileHash(Array(random.prefix(count))), hash, "\(count) random bytes")
        }
        XCTAssertEqual(Self.fileHash([UInt8](repeating: 0, count: 300_000)),
                       "3d7bd4178bc2851ba07d59c24c3a88ae0c7220e9920d6c5c6a06b01556d46404", "300,000 zeros")
        let block = Self.splitMixBytes(1_048_576, seed: 2)
        XCTAssertEqual(Self.fileHash(block + block + block),
                       "44c52b8d38f858c0611d23a0302158e2e00b8e44360b4f5b138ec6cd20060e9f", "a 1 MiB block three times")
        XCTAssertEqual(Self.fileHash([]), String(repeating: "0", count: 64), "the empty file")
    }

    /// The first byte hashed in a chunk (offset 8127) is 17, whose table entry has its top 16 bits
    /// zero: the hash matches there, 65 bytes short of the minimum, and hf_xet does not cut.
    func testAMatchBeforeTheMinimumDoesNotCut() {
        var bytes = Self.splitMixBytes(100_000, seed: 3)
        bytes[ContentChunker.minimumLength - 65] = 17
        XCTAssertEqual(gearTable[17] >> 48, 0)
        XCTAssertEqual(Self.fileHash(bytes), "72a459702c2306919075f79df7783d053dd6e9e09f6d65e25fb2b663299536d0")
        XCTAssertGreaterThanOrEqual(bytes.withUnsafeBytes { ContentChunker.chunkLengths(of: $0) }.first ?? 0, ContentChunker.minimumLength)
    }
}
