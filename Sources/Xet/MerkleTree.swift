/// A child of a Merkle node: a chunk, or a node below, by its hash and the bytes it covers.
public struct MerkleLeaf: Hashable, Sendable {
    public var hash: XetHash
    public var length: UInt64

    public init(hash: XetHash, length: UInt64) {
        self.hash = hash
        self.length = length
    }
}

/// Xet's aggregated Merkle tree, built from (hash, length) pairs alone, so a root can be assembled
/// from chunk hashes recorded wherever the chunks arrived, without their bytes.
///
/// Its shape is xet-core's (`merklehash/aggregated_hashes.rs`, not in the spec): each level cuts
/// its list into groups of 2 to 9; a group closes after its child i (i >= 2, counting from 0) when
/// that child's last word is 0 mod 4, or at 9 children; 2 or fewer left are one group. A group's
/// node hashes the lines "{hex} : {length}\n" of its children with the internal-node key.
public enum MerkleTree {
    /// The root over these leaves in order: a xorb's hash over its chunks, or the value a file's
    /// hash is made from. All zeros for none.
    public static func root(of leaves: [MerkleLeaf]) -> XetHash {
        guard !leaves.isEmpty else { return .zero }
        var level = leaves
        while level.count > 1 {
            var next: [MerkleLeaf] = []
            next.reserveCapacity(level.count / 2 + 1)
            var start = 0
            while start < level.count {
                let end = start + groupLength(level[start...])
                next.append(node(level[start..<end]))
                start = end
            }
            level = next
        }
        return level[0].hash
    }

    /// A file's hash (the `X-Xet-Hash`) over its chunks.
    public static func fileHash(of chunks: [MerkleLeaf]) -> XetHash {
        XetHashing.fileHash(root: root(of: chunks), isEmpty: chunks.isEmpty)
    }

    static func groupLength(_ rest: ArraySlice<MerkleLeaf>) -> Int {
        if rest.count <= 2 { return rest.count }
        let end = min(9, rest.count)
        for i in 2..<end where rest[rest.startIndex + i].hash.words.3 % 4 == 0 {
            return i + 1
        }
        return end
    }

    static func node(_ children: ArraySlice<MerkleLeaf>) -> MerkleLeaf {
        var hasher = Blake3(key: XetHashing.internalNodeKey)
        var total: UInt64 = 0
        for child in children {
            hasher.update(Array("\(child.hash.hex) : \(child.length)\n".utf8))
            total += child.length
        }
        return MerkleLeaf(hash: XetHash(bytes: hasher.finalize()), length: total)
    }
}
