/// How a chunk's bytes are stored in a xorb (the header's scheme byte).
public enum ChunkScheme: UInt8, Sendable, CaseIterable {
    case none = 0
    case lz4 = 1
    /// Byte grouping (`ByteGrouping`), then an LZ4 frame.
    case byteGrouping4LZ4 = 2

    /// The chunk's bytes stored this way.
    public func encode(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        switch self {
        case .none: return Array(bytes)
        case .lz4: return LZ4Frame.compress(bytes)
        case .byteGrouping4LZ4: return ByteGrouping.group(bytes).withUnsafeBytes { LZ4Frame.compress($0) }
        }
    }

    /// A stored chunk's bytes back, which must be exactly `length` bytes.
    public func decode(_ stored: UnsafeRawBufferPointer, length: Int) throws(XetFormatError) -> [UInt8] {
        switch self {
        case .none:
            guard stored.count == length else { throw .lengthMismatch(stored: stored.count, uncompressed: length) }
            return Array(stored)
        case .lz4:
            return try LZ4Frame.decompress(stored, length: length)
        case .byteGrouping4LZ4:
            do {
                return try LZ4Frame.decompress(stored, length: length).withUnsafeBytes { ByteGrouping.ungroup($0) }
            } catch .decompressionFailed(_, let reason) {
                throw .decompressionFailed(scheme: self, reason: reason)
            }
        }
    }

    public func decode(_ stored: [UInt8], length: Int) throws(XetFormatError) -> [UInt8] {
        // withUnsafeBytes rethrows untyped errors: carry the typed one out in a Result.
        try stored.withUnsafeBytes { raw in
            Result { () throws(XetFormatError) in try decode(raw, length: length) }
        }.get()
    }

    /// The smallest way to store these bytes (the first of equals in the order none, LZ4,
    /// grouped LZ4), as the test Hub stores every chunk.
    public static func smallest(for bytes: UnsafeRawBufferPointer) -> (scheme: ChunkScheme, stored: [UInt8]) {
        var best: (scheme: ChunkScheme, stored: [UInt8]) = (.none, Array(bytes))
        for scheme in [ChunkScheme.lz4, .byteGrouping4LZ4] {
            let stored = scheme.encode(bytes)
            if stored.count < best.stored.count { best = (scheme, stored) }
        }
        return best
    }
}
