// XetStoreFill - terms of a Xet-backed file taken from chunks already on disk: the cache base's
// `XetChunkIndex` says which final file holds a term's chunks; each chunk read from there must
// hash to the chunk hash the index recorded when that file verified, or the term is fetched
// from the CAS like any other (a file replaced, changed or evicted since is never trusted).
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Xet

struct XetStoreFill {
    let index: XetChunkIndex
    /// Entries read per xorb in this call.
    private var entries: [XetHash: [XetChunkIndex.Entry]] = [:]

    init(index: XetChunkIndex) { self.index = index }

    /// Writes into `staging` every term of `plan` not in `done` whose chunks a final file holds
    /// with the recorded hashes; returns them as records (their xorb bytes unknown: -1).
    /// The final file the staging file will replace may be read too: it is renamed over only
    /// after every read (the update scenario: revision 1 serves revision 2).
    mutating func fill(_ plan: XetFilePlan, skipping done: [String: XetDoneTerm], into staging: StagingFile) -> [XetDoneTerm] {
        var filled: [XetDoneTerm] = []
        var files: [String: Int32] = [:]
        defer { for fd in files.values { close(fd) } }
        for term in plan.terms where done[XetFilePlan.key(term)] == nil {
            if entries[term.xorb] == nil { entries[term.xorb] = index.entries(of: term.xorb.hex) }
            for entry in entries[term.xorb] ?? [] {
                guard let span = entry.spans.first(where: { $0.chunkStart <= term.chunks.lowerBound && term.chunks.upperBound <= $0.chunkEnd }),
                      let leaves = XetFileFetch.leaves(of: span) else { continue }
                let first = term.chunks.lowerBound - span.chunkStart
                let wanted = Array(leaves[first..<(first + term.chunks.count)])
                guard wanted.reduce(0, { $0 + Int($1.length) }) == term.length else { continue }
                let offset = span.offset + leaves[..<first].reduce(Int64(0)) { $0 + Int64($1.length) }
                if files[entry.path] == nil {
                    // A regular file only, no link followed, never a FIFO to block on: the index
                    // is a pointer anyone who can write the cache base could have aimed elsewhere
                    // (what is read is used only where it hashes right, and then the file's Merkle
                    // root and SHA-256 are checked).
                    let fd = open(entry.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
                    guard fd >= 0 else { continue }
                    var st = stat()
                    guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
                        close(fd)
                        continue
                    }
                    files[entry.path] = fd
                }
                guard let fd = files[entry.path], copy(wanted, from: fd, at: offset, to: staging, at: term.offset) else { continue }
                let hashes = wanted.flatMap(\.hash.bytes)
                filled.append(XetDoneTerm(offset: term.offset, xorb: term.xorb.hex, chunkStart: term.chunks.lowerBound,
                                          chunkEnd: term.chunks.upperBound, byteStart: -1, byteEnd: -1,
                                          hashes: Data(hashes).base64EncodedString(), lengths: wanted.map { Int($0.length) }))
                break
            }
        }
        return filled
    }

    /// Copies the chunks `leaves` from `fd` at `offset` into the staging file at `target`, each
    /// checked against its hash first; false at the first that differs or cannot be read.
    private func copy(_ leaves: [MerkleLeaf], from fd: Int32, at offset: Int64, to staging: StagingFile, at target: Int64) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 128 << 10)
        var from = offset
        var to = target
        for leaf in leaves {
            let length = Int(leaf.length)
            guard length <= buffer.count else { return false }
            let read = buffer.withUnsafeMutableBytes { FileIO.readFull(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<length]), at: from) }
            guard read == length,
                  buffer.withUnsafeBytes({ XetHashing.chunkHash(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }) == leaf.hash,
                  (try? buffer.withUnsafeBytes({ try staging.write(UnsafeRawBufferPointer(rebasing: $0[0..<length]), at: to) })) != nil else {
                return false
            }
            from += Int64(length)
            to += Int64(length)
        }
        return true
    }
}
