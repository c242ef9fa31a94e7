// FuzzXetChunks - the chunk-header decoder and the xorb range decoder over bytes from a xorb URL:
// headers, LZ4 frames and byte grouping from outside.
import FuzzSupport
import Foundation
import Xet

fuzzMain { data in
    let bytes = Array(data)
    if bytes.count >= ChunkHeader.size, let header = try? ChunkHeader(parsing: bytes.prefix(ChunkHeader.size)) {
        expect(header.bytes == Array(bytes.prefix(ChunkHeader.size)), "a header does not re-encode to its bytes")
        expect(header.uncompressedLength <= ContentChunker.maximumLength, "header length past the chunk limit")
    }
    // The same bytes fed whole and in pieces of 7 give the same chunks, each of its header's length
    // and hashed as its bytes.
    var whole = XorbRangeDecoder(firstChunkIndex: 3)
    let wholeChunks = try? whole.feed(bytes)
    var pieces = XorbRangeDecoder(firstChunkIndex: 3)
    var pieceChunks: [DecodedChunk]? = []
    var offset = 0
    while offset < bytes.count, pieceChunks != nil {
        let end = min(bytes.count, offset + 7)
        if let got = try? pieces.feed(Array(bytes[offset..<end])) { pieceChunks! += got } else { pieceChunks = nil }
        offset = end
    }
    expect((wholeChunks == nil) == (pieceChunks == nil), "feeding in pieces changed whether the range decodes")
    if let wholeChunks, let pieceChunks {
        expect(wholeChunks == pieceChunks, "feeding in pieces changed the chunks")
        for (i, chunk) in wholeChunks.enumerated() {
            expect(chunk.index == 3 + i, "chunk index \(chunk.index) at position \(i)")
            expect(chunk.bytes.count <= ContentChunker.maximumLength, "a chunk of \(chunk.bytes.count) bytes")
            expect(chunk.hash == XetHashing.chunkHash(chunk.bytes), "a chunk's hash is not its bytes' hash")
        }
    }
}
