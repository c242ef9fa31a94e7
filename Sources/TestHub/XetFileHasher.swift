// XetFileHasher - a file's Xet hash straight from disk: chunks cut as it is read, each hashed,
// the Merkle root over them, the file hash over the root (`speech-testhub --xet-hash`, and the
// check against hf_xet.hash_files in scripts/check-hub-fidelity).
import Foundation
import Xet

enum XetFileHasher {
    static func hash(path: String) throws -> (XetHash, Int) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        defer { try? handle.close() }
        var chunker = ContentChunker()
        var carry: [UInt8] = []
        var leaves: [MerkleLeaf] = []
        var size = 0
        while let piece = try handle.read(upToCount: 8 << 20), !piece.isEmpty {
            size += piece.count
            let lengths = piece.withUnsafeBytes { chunker.feed($0) }
            carry += piece
            var start = 0
            for length in lengths {
                leaves.append(MerkleLeaf(hash: XetHashing.chunkHash(carry[start..<(start + length)]), length: UInt64(length)))
                start += length
            }
            carry.removeFirst(start)
        }
        if chunker.finish() != nil {
            leaves.append(MerkleLeaf(hash: XetHashing.chunkHash(carry), length: UInt64(carry.count)))
        }
        return (MerkleTree.fileHash(of: leaves), size)
    }
}
