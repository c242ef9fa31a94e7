/// One chunk as it came out of a xorb: its index in the xorb, its bytes, and their chunk hash.
public struct DecodedChunk: Sendable, Equatable {
    public var index: Int
    public var bytes: [UInt8]
    public var hash: XetHash
    /// The bytes it took in the xorb: its header and its stored (maybe compressed) bytes. A
    /// range that stops after this chunk resumes at the sum of these from the range's start.
    public var storedBytes: Int = 0
}

/// Turns the bytes of a xorb range, in whatever pieces they arrive, into verified-length chunks
/// with their hashes, so a chunk is decompressed and hashed where it arrives and nothing needs
/// to read it back. Holds at most one chunk's stored bytes.
public struct XorbRangeDecoder: Sendable {
    private var nextIndex: Int
    private var pending: [UInt8] = []
    private var header: ChunkHeader?

    /// For a range whose first byte is the header of chunk `firstChunkIndex`.
    public init(firstChunkIndex: Int) {
        nextIndex = firstChunkIndex
    }

    /// Takes the next bytes of the range; returns the chunks they completed.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(XetFormatError) -> [DecodedChunk] {
        var chunks: [DecodedChunk] = []
        var offset = 0
        while offset < bytes.count {
            let need = header.map { $0.storedLength } ?? ChunkHeader.size
            let take = min(need - pending.count, bytes.count - offset)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + take)]))
            offset += take
            guard pending.count == need else { continue }
            if let current = header {
                let plain = try current.scheme.decode(pending, length: current.uncompressedLength)
                chunks.append(DecodedChunk(index: nextIndex, bytes: plain, hash: XetHashing.chunkHash(plain),
                                           storedBytes: ChunkHeader.size + current.storedLength))
                nextIndex += 1
                header = nil
                pending.removeAll(keepingCapacity: true)
            } else {
                header = try ChunkHeader(parsing: pending)
                pending.removeAll(keepingCapacity: true)
                // A chunk of zero stored bytes is complete with its header.
                if header!.storedLength == 0 {
                    let current = header!
                    let plain = try current.scheme.decode([UInt8](), length: current.uncompressedLength)
                    chunks.append(DecodedChunk(index: nextIndex, bytes: plain, hash: XetHashing.chunkHash(plain),
                                               storedBytes: ChunkHeader.size))
                    nextIndex += 1
                    header = nil
                }
            }
        }
        return chunks
    }

    public mutating func feed(_ bytes: [UInt8]) throws(XetFormatError) -> [DecodedChunk] {
        var copy = self
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(XetFormatError) in try copy.feed(raw) }
        }
        self = copy
        return try result.get()
    }

    /// Ends the range: throws when it stopped inside a chunk.
    public func finish() throws(XetFormatError) {
        if let header {
            throw .truncatedChunk(index: nextIndex, have: pending.count, need: header.storedLength)
        }
        if !pending.isEmpty { throw .truncatedHeader(pending.count) }
    }

    /// The index the next chunk will have.
    public var nextChunkIndex: Int { nextIndex }
}
