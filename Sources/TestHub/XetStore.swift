// XetStore - the test Hub's content-addressed storage: LFS files of Xet repos cut into chunks,
// packed into xorbs on disk under <root>/.xet-cas/, and described by terms, as the Hub's CAS
// holds them. A chunk already stored (by any file) is referenced, not stored again, so a second
// revision that shares most chunks with the first adds only a small xorb (docs/testhub.md).
import Foundation
import Xet

/// A run of consecutive chunks of one xorb, as a reconstruction term names it, at its place in the file.
struct XetTerm: Sendable {
    let xorb: XetHash
    let chunks: Range<Int>
    let length: Int
    /// Where the term's bytes start in the file.
    let fileOffset: Int
}

/// One file as the CAS holds it.
struct XetFile: Sendable {
    let fileHash: XetHash
    let size: Int
    let terms: [XetTerm]
    /// Each chunk of the file in order: its xorb and index there.
    let chunkPlaces: [(xorb: XetHash, index: Int)]
}

/// A stored xorb: where its bytes are and where each chunk starts in them.
struct StoredXorb: Sendable {
    let path: String
    /// Each chunk's header offset, then the end of the last chunk.
    let chunkOffsets: [Int]
    var size: Int { chunkOffsets.last ?? 0 }
}

final class XetStore: @unchecked Sendable {
    let directory: URL
    private let lock = NSLock()
    /// Per content (SHA-256 of the file), its Xet form.
    private var files: [String: XetFile] = [:]
    private var byFileHash: [XetHash: XetFile] = [:]
    private var xorbs: [XetHash: StoredXorb] = [:]
    /// Every stored chunk: where it is.
    private var chunkIndex: [XetHash: (xorb: XetHash, index: Int)] = [:]

    init(root: URL) {
        directory = root.appendingPathComponent(".xet-cas", isDirectory: true)
    }

    /// The Xet form of `file` (made, and its new chunks stored, on first use); nil when it cannot
    /// be read or is empty (an empty file is never Xet-backed here).
    func xetFile(for file: ServedFile) -> XetFile? {
        guard file.size > 0 else { return nil }
        return lock.withLock {
            if let known = files[file.sha256] { return known }
            guard let made = build(diskPath: file.diskPath) else { return nil }
            files[file.sha256] = made
            byFileHash[made.fileHash] = made
            return made
        }
    }

    func file(withHash hash: XetHash) -> XetFile? {
        lock.withLock { byFileHash[hash] }
    }

    func xorb(_ hash: XetHash) -> StoredXorb? {
        lock.withLock { xorbs[hash] }
    }

    /// Where chunk `index` of a file lies in its xorb: the xorb and the offset of a byte in the
    /// middle of that chunk's stored bytes (what a corrupt-chunk fault flips).
    func storedByte(ofChunk index: Int, in file: XetFile) -> (xorb: XetHash, offset: Int)? {
        guard file.chunkPlaces.indices.contains(index) else { return nil }
        let place = file.chunkPlaces[index]
        return lock.withLock {
            guard let xorb = xorbs[place.xorb] else { return nil }
            let start = xorb.chunkOffsets[place.index] + ChunkHeader.size
            let end = xorb.chunkOffsets[place.index + 1]
            return (place.xorb, start + (end - start) / 2)
        }
    }

    // MARK: - Building (under the lock)

    private func build(diskPath: String) -> XetFile? {
        guard let handle = FileHandle(forReadingAtPath: diskPath) else { return nil }
        defer { try? handle.close() }
        var chunker = ContentChunker()
        var carry: [UInt8] = []
        var leaves: [MerkleLeaf] = []
        var places: [(xorb: XetHash?, pending: Int?, index: Int)] = []
        var pending = XorbBuilder()
        var pendingIndex: [XetHash: Int] = [:]
        var pendingGeneration = 0
        var resolvedPending: [Int: XetHash] = [:]

        func flush() -> Bool {
            guard !pending.isEmpty else { return true }
            let hash = pending.hash
            guard store(pending, as: hash) else { return false }
            resolvedPending[pendingGeneration] = hash
            pendingGeneration += 1
            pending = XorbBuilder()
            pendingIndex.removeAll()
            return true
        }
        func add(_ chunk: ArraySlice<UInt8>) -> Bool {
            let hash = XetHashing.chunkHash(chunk)
            leaves.append(MerkleLeaf(hash: hash, length: UInt64(chunk.count)))
            if let known = chunkIndex[hash] {
                places.append((known.xorb, nil, known.index))
                return true
            }
            if let index = pendingIndex[hash] {
                places.append((nil, pendingGeneration, index))
                return true
            }
            var appended = chunk.withUnsafeBytes { pending.append($0, hash: hash) }
            if !appended {
                guard flush() else { return false }
                appended = chunk.withUnsafeBytes { pending.append($0, hash: hash) }
            }
            pendingIndex[hash] = pending.chunks.count - 1
            places.append((nil, pendingGeneration, pending.chunks.count - 1))
            return true
        }

        var size = 0
        while true {
            let piece: Data
            do { piece = try handle.read(upToCount: 8 << 20) ?? Data() } catch { return nil }
            if piece.isEmpty { break }
            size += piece.count
            let lengths = piece.withUnsafeBytes { chunker.feed($0) }
            carry += piece
            var start = 0
            for length in lengths {
                guard add(carry[start..<(start + length)]) else { return nil }
                start += length
            }
            carry.removeFirst(start)
        }
        if chunker.finish() != nil {
            guard add(carry[...]) else { return nil }
        }
        guard flush(), size > 0 else { return nil }

        var chunkPlaces: [(xorb: XetHash, index: Int)] = []
        for place in places {
            chunkPlaces.append((place.xorb ?? resolvedPending[place.pending!]!, place.index))
        }
        var terms: [XetTerm] = []
        var offset = 0
        for (i, place) in chunkPlaces.enumerated() {
            let length = Int(leaves[i].length)
            if let last = terms.last, last.xorb == place.xorb, last.chunks.upperBound == place.index {
                terms[terms.count - 1] = XetTerm(xorb: last.xorb, chunks: last.chunks.lowerBound..<(place.index + 1),
                                                 length: last.length + length, fileOffset: last.fileOffset)
            } else {
                terms.append(XetTerm(xorb: place.xorb, chunks: place.index..<(place.index + 1), length: length, fileOffset: offset))
            }
            offset += length
        }
        return XetFile(fileHash: MerkleTree.fileHash(of: leaves), size: size, terms: terms, chunkPlaces: chunkPlaces)
    }

    /// Writes a xorb (temp file, then rename) and indexes its chunks.
    private func store(_ xorb: XorbBuilder, as hash: XetHash) -> Bool {
        let path = directory.appendingPathComponent(hash.hex).path
        if xorbs[hash] == nil {
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let temp = path + ".tmp.\(getpid())"
            guard FileManager.default.createFile(atPath: temp, contents: Data(xorb.bytes)),
                  rename(temp, path) == 0 else { return false }
            xorbs[hash] = StoredXorb(path: path, chunkOffsets: xorb.chunkOffsets)
        }
        for (index, chunk) in xorb.chunks.enumerated() where chunkIndex[chunk.hash] == nil {
            chunkIndex[chunk.hash] = (hash, index)
        }
        return true
    }
}
