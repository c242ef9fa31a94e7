/// Packs chunks into one xorb as Xet stores it: each chunk's 8-byte header and its bytes stored
/// the smallest way, at most 64 MiB and 8,192 chunks; the xorb's hash is the Merkle root over its
/// chunks. (No footer: downloads never read it.)
public struct XorbBuilder: Sendable {
    public static let maximumBytes = 64 * 1024 * 1024
    public static let maximumChunks = 8192

    public private(set) var bytes: [UInt8] = []
    /// Each chunk's hash and uncompressed length, in order.
    public private(set) var chunks: [MerkleLeaf] = []
    /// Where each chunk's header starts in `bytes`, and the end of the last chunk.
    public private(set) var chunkOffsets: [Int] = [0]

    public init() {}

    /// Appends a chunk stored the smallest way; false (nothing appended) when the xorb is full.
    public mutating func append(_ chunk: UnsafeRawBufferPointer, hash: XetHash) -> Bool {
        let (scheme, stored) = ChunkScheme.smallest(for: chunk)
        return append(stored: stored, scheme: scheme, uncompressedLength: chunk.count, hash: hash)
    }

    /// Appends a chunk already stored with `scheme`; false when the xorb is full.
    public mutating func append(stored: [UInt8], scheme: ChunkScheme, uncompressedLength: Int, hash: XetHash) -> Bool {
        guard chunks.count < Self.maximumChunks,
              bytes.count + ChunkHeader.size + stored.count <= Self.maximumBytes else { return false }
        bytes += ChunkHeader(scheme: scheme, storedLength: stored.count, uncompressedLength: uncompressedLength).bytes
        bytes += stored
        chunks.append(MerkleLeaf(hash: hash, length: UInt64(uncompressedLength)))
        chunkOffsets.append(bytes.count)
        return true
    }

    public var isEmpty: Bool { chunks.isEmpty }

    public var hash: XetHash { MerkleTree.root(of: chunks) }
}
