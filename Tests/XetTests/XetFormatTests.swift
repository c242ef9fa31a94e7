import Foundation
import TestHub
import XCTest
@testable import Xet

/// Xet's hashes, Merkle tree, chunker, chunk headers, schemes, xorbs and reconstructions.
final class XetFormatTests: XCTestCase {
    // xet-core's reference hashes (merklehash/src/aggregated_hashes.rs, test_correctness):
    // chunk hashes made from seeds, with lengths, and the roots and zero-salt file hashes.
    let a = XetHash(hex: "cfc5d07f6f03c29bbf424132963fe08d19a37d5757aaf520bf08119f05cd56d6")!
    let b = XetHash(hex: "c3e67584b5c4fc2a89837ec39e40f2c8a6bb0b2987ac94cd4b31e5fbdd210a72")!
    let c = XetHash(hex: "0d2beb91b9196929a5ddec9f6e306924ddf4a24268e3e59fd8464738d525af37")!
    let d = XetHash(hex: "adf8773496a9b7319b2e50dc98093f344053b17d8ad37100b9c07d9805988784")!

    func testMerkleRootsAndFileHashesMatchXetCoresReference() {
        XCTAssertEqual(MerkleTree.root(of: []), .zero)
        XCTAssertEqual(MerkleTree.fileHash(of: []), .zero)
        XCTAssertEqual(MerkleTree.root(of: [MerkleLeaf(hash: a, length: 100)]), a)
        XCTAssertEqual(MerkleTree.fileHash(of: [MerkleLeaf(hash: a, length: 100)]).hex,
                       "8e16257caa3fe079d484d872a8975264b2ff683b0d6db9028cc7c0f968a45661")
        let three = [MerkleLeaf(hash: a, length: 100), MerkleLeaf(hash: b, length: 200), MerkleLeaf(hash: c, length: 300)]
        XCTAssertEqual(MerkleTree.root(of: three).hex, "71ec1275fca074724e2dd666921b3277c7cee603e4d025bcab2d4050015be2bc")
        XCTAssertEqual(MerkleTree.fileHash(of: three).hex, "54e55dccc6653c612bdb5576c5d3cb34bb31bc4e100248abccf4c908b3ef7715")
        let fourSame = Array(repeating: MerkleLeaf(hash: a, length: 100), count: 4)
        XCTAssertEqual(MerkleTree.root(of: fourSame).hex, "89f2ada89ff8c96763c6b25010e6dd76a4c05b1466207633ea559acf2093211b")
        let six = [MerkleLeaf(hash: a, length: 100), MerkleLeaf(hash: b, length: 200), MerkleLeaf(hash: a, length: 100),
                   MerkleLeaf(hash: b, length: 200), MerkleLeaf(hash: c, length: 300), MerkleLeaf(hash: d, length: 400)]
        XCTAssertEqual(MerkleTree.root(of: six).hex, "52c826f99507aa05d0b45e9837fa1709e0485425cfbcb1e80db3905cf98b3ee9")
        XCTAssertEqual(MerkleTree.fileHash(of: six).hex, "91d21684db364c8883ab8209fa5eb2e781cf07f37e1fa43e731c30839afe422f")
        let withZero = [MerkleLeaf(hash: .zero, length: 0), MerkleLeaf(hash: a, length: 100),
                        MerkleLeaf(hash: .zero, length: 0), MerkleLeaf(hash: a, length: 100)]
        XCTAssertEqual(MerkleTree.root(of: withZero).hex, "e1755c85be07fd6b7a8d7becc85e6d8c5f507f2a3d38b316bcb6f97855e72188")
        XCTAssertEqual(MerkleTree.root(of: [MerkleLeaf(hash: a, length: 100), MerkleLeaf(hash: .zero, length: 0)]).hex,
                       "e8660f81494ca836a58e395c1395ef97870ed71e2b113eec1fab6b3361f46dd6")
    }

    func testHexFormReadsEachWordLittleEndian() {
        let bytes = (0..<32).map { UInt8($0) }
        let hash = XetHash(bytes: bytes)
        XCTAssertEqual(hash.hex, "0706050403020100" + "0f0e0d0c0b0a0908" + "1716151413121110" + "1f1e1d1c1b1a1918")
        XCTAssertEqual(XetHash(hex: hash.hex), hash)
        XCTAssertEqual(hash.bytes, bytes)
        XCTAssertNil(XetHash(hex: String(hash.hex.dropLast())))
        XCTAssertNil(XetHash(hex: String(hash.hex.dropLast()) + "g"))
        XCTAssertEqual(XetHash(hex: hash.hex.uppercased()), hash)
        XCTAssertNil(XetHash(hex: "+" + String(hash.hex.dropLast())))
    }

    func testChunkHashIsBlake3KeyedWithTheDataKey() {
        var keyed = Blake3(key: XetHashing.dataKey)
        keyed.update(Array("hello".utf8))
        XCTAssertEqual(XetHashing.chunkHash(Array("hello".utf8)), XetHash(bytes: keyed.finalize()))
    }

    func testChunkerCutsWithinItsBoundsTheSameInAnyPieces() {
        var generator = SplitMix64(seed: 7)
        let data = (0..<(3 * 1024 * 1024 + 12345)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let whole = data.withUnsafeBytes { ContentChunker.chunkLengths(of: $0) }
        XCTAssertEqual(whole.reduce(0, +), data.count)
        XCTAssertGreaterThan(whole.count, 20)
        for length in whole.dropLast() {
            XCTAssertTrue((ContentChunker.minimumLength...ContentChunker.maximumLength).contains(length), "chunk of \(length)")
        }
        var chunker = ContentChunker()
        var pieces: [Int] = []
        var offset = 0
        var step = 1
        data.withUnsafeBytes { raw in
            while offset < raw.count {
                let end = min(raw.count, offset + step)
                pieces += chunker.feed(UnsafeRawBufferPointer(rebasing: raw[offset..<end]))
                offset = end
                step = (step * 7 + 3) % 100_000 + 1
            }
        }
        if let last = chunker.finish() { pieces.append(last) }
        XCTAssertEqual(pieces, whole)
        // Content-defined: an insert near the start moves only the chunks around it.
        var edited = data
        edited.insert(contentsOf: [1, 2, 3, 4, 5], at: 100_000)
        let after = edited.withUnsafeBytes { ContentChunker.chunkLengths(of: $0) }
        XCTAssertEqual(Array(after.suffix(whole.count - 3)), Array(whole.suffix(whole.count - 3)))
        // Zeros never cut: every chunk is the maximum.
        let zeros = [UInt8](repeating: 0, count: 3 * ContentChunker.maximumLength + 10)
        XCTAssertEqual(zeros.withUnsafeBytes { ContentChunker.chunkLengths(of: $0) },
                       [ContentChunker.maximumLength, ContentChunker.maximumLength, ContentChunker.maximumLength, 10])
    }

    func testChunkHeaderRoundTripsAndRefusesWhatIsNotAHeader() throws {
        let header = ChunkHeader(scheme: .byteGrouping4LZ4, storedLength: 0x01_2345, uncompressedLength: 0x01_8000)
        XCTAssertEqual(header.bytes, [0, 0x45, 0x23, 0x01, 2, 0x00, 0x80, 0x01])
        XCTAssertEqual(try ChunkHeader(parsing: header.bytes), header)
        XCTAssertThrowsError(try ChunkHeader(parsing: [0, 1, 0, 0, 0, 1, 0])) { XCTAssertEqual($0 as? XetFormatError, .truncatedHeader(7)) }
        XCTAssertThrowsError(try ChunkHeader(parsing: [1, 1, 0, 0, 0, 1, 0, 0])) { XCTAssertEqual($0 as? XetFormatError, .unknownHeaderVersion(1)) }
        XCTAssertThrowsError(try ChunkHeader(parsing: [0, 1, 0, 0, 3, 1, 0, 0])) { XCTAssertEqual($0 as? XetFormatError, .unknownScheme(3)) }
        XCTAssertThrowsError(try ChunkHeader(parsing: [0, 1, 0, 0, 0, 2, 0, 0])) { XCTAssertEqual($0 as? XetFormatError, .lengthMismatch(stored: 1, uncompressed: 2)) }
        XCTAssertThrowsError(try ChunkHeader(parsing: [0, 1, 0, 0, 1, 0xFF, 0xFF, 0xFF])) {
            XCTAssertEqual($0 as? XetFormatError, .chunkTooLarge(0xFF_FFFF, limit: ContentChunker.maximumLength))
        }
        XCTAssertTrue("\(XetFormatError.unknownScheme(3))".contains("scheme 3"))
    }

    func testByteGroupingPutsLeftoverBytesInTheFirstGroups() {
        let seven: [UInt8] = [0, 1, 2, 3, 4, 5, 6]
        XCTAssertEqual(seven.withUnsafeBytes { ByteGrouping.group($0) }, [0, 4, 1, 5, 2, 6, 3])
        for n in 0..<13 {
            let bytes = (0..<n).map { UInt8($0 * 7 + 1) }
            let grouped = bytes.withUnsafeBytes { ByteGrouping.group($0) }
            XCTAssertEqual(grouped.withUnsafeBytes { ByteGrouping.ungroup($0) }, bytes)
        }
    }

    func testEverySchemeRoundTripsAndRefusesDamage() throws {
        var generator = SplitMix64(seed: 11)
        let random = (0..<70_001).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let zeros = [UInt8](repeating: 0, count: 65_537)
        // Floats whose exponents repeat: what byte grouping is for.
        let floats = (0..<20_000).flatMap { i -> [UInt8] in
            let bits = Float(1.0 + Float(i % 97) / 1000).bitPattern
            return [UInt8(bits & 0xFF), UInt8((bits >> 8) & 0xFF), UInt8((bits >> 16) & 0xFF), UInt8(bits >> 24)]
        }
        for input in [random, zeros, floats, [], [42]] {
            for scheme in ChunkScheme.allCases {
                let stored = input.withUnsafeBytes { scheme.encode($0) }
                let back = try stored.withUnsafeBytes { try scheme.decode($0, length: input.count) }
                XCTAssertEqual(back, input, "scheme \(scheme) of \(input.count) bytes")
            }
        }
        XCTAssertEqual(random.withUnsafeBytes { ChunkScheme.smallest(for: $0).scheme }, ChunkScheme.none)
        XCTAssertEqual(zeros.withUnsafeBytes { ChunkScheme.smallest(for: $0).scheme }, .lz4)
        XCTAssertEqual(floats.withUnsafeBytes { ChunkScheme.smallest(for: $0).scheme }, .byteGrouping4LZ4)
        // A frame that says more or less than the header, or is cut, is refused.
        let frame = zeros.withUnsafeBytes { ChunkScheme.lz4.encode($0) }
        XCTAssertThrowsError(try frame.withUnsafeBytes { try ChunkScheme.lz4.decode($0, length: zeros.count - 1) })
        XCTAssertThrowsError(try frame.withUnsafeBytes { try ChunkScheme.lz4.decode($0, length: zeros.count + 1) })
        XCTAssertThrowsError(try frame.dropLast(3).withUnsafeBytes { try ChunkScheme.lz4.decode($0, length: zeros.count) })
        XCTAssertThrowsError(try (frame + [0]).withUnsafeBytes { try ChunkScheme.lz4.decode($0, length: zeros.count) })
    }

    func testXorbRangeDecoderYieldsEveryChunkWithItsHashFromAnyPieces() throws {
        var generator = SplitMix64(seed: 5)
        var data = (0..<600_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        data += [UInt8](repeating: 0, count: 300_000)
        let lengths = data.withUnsafeBytes { ContentChunker.chunkLengths(of: $0) }
        var builder = XorbBuilder()
        var offset = 0
        var expected: [DecodedChunk] = []
        for (i, length) in lengths.enumerated() {
            let chunk = Array(data[offset..<(offset + length)])
            let hash = XetHashing.chunkHash(chunk)
            XCTAssertTrue(chunk.withUnsafeBytes { builder.append($0, hash: hash) })
            expected.append(DecodedChunk(index: i, bytes: chunk, hash: hash))
            offset += length
        }
        for step in [1, 7, 8, 9, 4096, 1 << 20] {
            var decoder = XorbRangeDecoder(firstChunkIndex: 0)
            var got: [DecodedChunk] = []
            var at = 0
            while at < builder.bytes.count {
                let end = min(builder.bytes.count, at + step)
                got += try decoder.feed(Array(builder.bytes[at..<end]))
                at = end
            }
            try decoder.finish()
            XCTAssertEqual(got.map { DecodedChunk(index: $0.index, bytes: $0.bytes, hash: $0.hash) }, expected, "pieces of \(step)")
            // Each chunk says how many xorb bytes it took: a range resumes after the last whole chunk.
            XCTAssertEqual(got.reduce(0) { $0 + $1.storedBytes }, builder.bytes.count, "pieces of \(step)")
        }
        // A range from chunk 2 on: indexes count from there.
        var fromTwo = XorbRangeDecoder(firstChunkIndex: 2)
        let tail = try fromTwo.feed(Array(builder.bytes[builder.chunkOffsets[2]...]))
        XCTAssertEqual(tail.map(\.index), Array(2..<lengths.count))
        // The xorb hash is the root over its chunks.
        XCTAssertEqual(builder.hash, MerkleTree.root(of: expected.map { MerkleLeaf(hash: $0.hash, length: UInt64($0.bytes.count)) }))
        // A range cut short is an error at its end, not a short chunk.
        var cut = XorbRangeDecoder(firstChunkIndex: 0)
        _ = try cut.feed(Array(builder.bytes[0..<(builder.chunkOffsets[1] + 20)]))
        XCTAssertThrowsError(try cut.finish())
        // A flipped byte in a stored (uncompressed) chunk changes that chunk's hash only.
        var flipped = builder.bytes
        flipped[ChunkHeader.size + 10] ^= 0x40
        var decoder = XorbRangeDecoder(firstChunkIndex: 0)
        let damaged = try decoder.feed(flipped)
        XCTAssertNotEqual(damaged[0].hash, expected[0].hash)
        XCTAssertEqual(damaged[1].hash, expected[1].hash)
    }

    func testXorbBuilderStopsAtItsChunkLimit() {
        var builder = XorbBuilder()
        let one: [UInt8] = [1]
        let hash = XetHashing.chunkHash(one)
        for _ in 0..<XorbBuilder.maximumChunks {
            XCTAssertTrue(one.withUnsafeBytes { builder.append($0, hash: hash) })
        }
        XCTAssertFalse(one.withUnsafeBytes { builder.append($0, hash: hash) })
        XCTAssertEqual(builder.chunks.count, XorbBuilder.maximumChunks)
    }

    func testReconstructionRoundTripsInBothVersions() throws {
        let fetch = XetReconstruction.Fetch(url: "http://127.0.0.2:1/xorb/x?sig=1", chunks: 0..<4, bytes: 0...1999)
        let recon = XetReconstruction(offsetIntoFirstRange: 10,
                                      terms: [.init(xorb: a, chunks: 0..<2, unpackedLength: 100_000),
                                              .init(xorb: a, chunks: 2..<4, unpackedLength: 90_000)],
                                      fetches: [a: [fetch]])
        XCTAssertEqual(try XetReconstruction.parse(recon.json(.v2), version: .v2), recon)
        XCTAssertEqual(try XetReconstruction.parse(recon.json(.v1), version: .v1), recon)
    }

    func testReconstructionRefusesWhatCannotBeTrusted() {
        func refused(_ json: String, _ fragment: String, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertThrowsError(try XetReconstruction.parse(Data(json.utf8), version: .v2), file: file, line: line) { error in
                XCTAssertTrue("\(error)".contains(fragment), "\(error)", file: file, line: line)
            }
        }
        let h = a.hex
        let xorbs = "\"xorbs\":{\"\(h)\":[{\"url\":\"http://x/y\",\"ranges\":[{\"chunks\":{\"start\":0,\"end\":2},\"bytes\":{\"start\":0,\"end\":99}}]}]}"
        refused("[]", "not a JSON object")
        refused("{\"offset_into_first_range\":true,\"terms\":[],\(xorbs)}", "offset_into_first_range is missing or not a number")
        refused("{\"offset_into_first_range\":0,\"terms\":[{\"hash\":\"zz\",\"unpacked_length\":5,\"range\":{\"start\":0,\"end\":1}}],\(xorbs)}", "hex hash")
        refused("{\"offset_into_first_range\":0,\"terms\":[{\"hash\":\"\(h)\",\"unpacked_length\":5,\"range\":{\"start\":1,\"end\":1}}],\(xorbs)}", "not a non-empty range")
        refused("{\"offset_into_first_range\":0,\"terms\":[{\"hash\":\"\(h)\",\"unpacked_length\":5,\"range\":{\"start\":1,\"end\":3}}],\(xorbs)}", "no fetch that covers it")
        refused("{\"offset_into_first_range\":5,\"terms\":[{\"hash\":\"\(h)\",\"unpacked_length\":5,\"range\":{\"start\":0,\"end\":1}}],\(xorbs)}", "past the first term")
        refused("{\"offset_into_first_range\":0,\"terms\":[{\"hash\":\"\(h)\",\"unpacked_length\":300000,\"range\":{\"start\":0,\"end\":2}}],\(xorbs)}", "claims 300000 bytes")
        refused("{\"offset_into_first_range\":0,\"terms\":[],\"xorbs\":{\"\(h)\":[{\"url\":\"file:///etc/passwd\",\"ranges\":[{\"chunks\":{\"start\":0,\"end\":2},\"bytes\":{\"start\":0,\"end\":99}}]}]}}", "http(s) URL")
        XCTAssertNoThrow(try XetReconstruction.parse(Data("{\"offset_into_first_range\":0,\"terms\":[{\"hash\":\"\(h)\",\"unpacked_length\":5,\"range\":{\"start\":0,\"end\":1}}],\(xorbs)}".utf8), version: .v2))
    }
}
