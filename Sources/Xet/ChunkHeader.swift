/// The 8 bytes before every chunk in a xorb: `u8 version (0) | u24 LE stored length | u8 scheme |
/// u24 LE uncompressed length`.
public struct ChunkHeader: Hashable, Sendable {
    public static let size = 8
    public static let version: UInt8 = 0
    /// A chunk's stored or uncompressed length fits 24 bits; Xet's chunks are at most 128 KiB.
    public static let maximumLength = (1 << 24) - 1

    public var scheme: ChunkScheme
    public var storedLength: Int
    public var uncompressedLength: Int

    public init(scheme: ChunkScheme, storedLength: Int, uncompressedLength: Int) {
        precondition((0...Self.maximumLength).contains(storedLength) && (0...Self.maximumLength).contains(uncompressedLength))
        self.scheme = scheme
        self.storedLength = storedLength
        self.uncompressedLength = uncompressedLength
    }

    public var bytes: [UInt8] {
        [Self.version,
         UInt8(truncatingIfNeeded: storedLength), UInt8(truncatingIfNeeded: storedLength >> 8),
         UInt8(truncatingIfNeeded: storedLength >> 16),
         scheme.rawValue,
         UInt8(truncatingIfNeeded: uncompressedLength), UInt8(truncatingIfNeeded: uncompressedLength >> 8),
         UInt8(truncatingIfNeeded: uncompressedLength >> 16)]
    }

    /// Reads a header from 8 bytes; throws on an unknown version or scheme, or a length past
    /// `limit` (a chunk's uncompressed length is at most 128 KiB; a decoder should not believe
    /// more).
    public init(parsing header: some Collection<UInt8>, limit: Int = ContentChunker.maximumLength) throws(XetFormatError) {
        let b = Array(header)
        guard b.count == Self.size else { throw .truncatedHeader(b.count) }
        guard b[0] == Self.version else { throw .unknownHeaderVersion(b[0]) }
        guard let scheme = ChunkScheme(rawValue: b[4]) else { throw .unknownScheme(b[4]) }
        let stored = Int(b[1]) | Int(b[2]) << 8 | Int(b[3]) << 16
        let uncompressed = Int(b[5]) | Int(b[6]) << 8 | Int(b[7]) << 16
        guard uncompressed <= limit else { throw .chunkTooLarge(uncompressed, limit: limit) }
        // A stored chunk is never much larger than its bytes: LZ4's worst case is a few bytes per
        // 64 KiB block past the length, plus the frame's header and footer.
        guard stored <= Self.storedBound(uncompressed) else { throw .chunkTooLarge(stored, limit: Self.storedBound(uncompressed)) }
        if scheme == .none, stored != uncompressed { throw .lengthMismatch(stored: stored, uncompressed: uncompressed) }
        self.scheme = scheme
        self.storedLength = stored
        self.uncompressedLength = uncompressed
    }

    /// The most bytes a chunk of `uncompressed` bytes may be stored as.
    static func storedBound(_ uncompressed: Int) -> Int {
        uncompressed + uncompressed / 255 + 64
    }
}
