// XetFileFetch - one fetch of one Xet-backed file, shared by its range tasks: the tasks left,
// the heads of the terms being written, the chunk hashes of the terms written (recorded in the
// staging file as each one ends), the bytes written for progress, and the first failure.
import Foundation
import HubClient
import HubTypes
import ModelCache
import Xet

/// The shared state of one fetch of one Xet-backed file: what its ranges have written.
final class XetFileFetch: @unchecked Sendable {
    let file: RepoFile
    let staging: StagingFile
    let plan: XetFilePlan
    let cas: XetCAS
    let hash: String
    private let lock = NSLock()
    /// Per term, its chunks' (hash, length) once every chunk of it is written.
    private var leaves: [[MerkleLeaf]?]
    /// Bytes written (each term's bytes counted once per term): the file's progress.
    private var written: Int64 = 0
    /// The first failure of a range: the other ranges stop.
    private var failure: Error?
    private var queue: [XetRangeTask]

    /// A term being written: its chunks written so far from its first, and where they were in
    /// the xorb. Each term is written by one range task at a time.
    struct TermHead {
        var leaves: [MerkleLeaf] = []
        var written = 0
        var byteStart = 0
        var byteEnd = -1
        /// The index of the next chunk the term needs.
        var next: Int
    }
    private var heads: [Int: TermHead] = [:]

    /// `done`: finished terms (by `XetFilePlan.key`); `started`: heads of terms a previous call
    /// was writing (by `XetFilePlan.headKey`), which the ranges go on from.
    init(file: RepoFile, staging: StagingFile, plan: XetFilePlan, cas: XetCAS, hash: String,
         done: [String: XetDoneTerm], started: [String: XetDoneTerm] = [:], tasks: [XetRangeTask]) {
        self.file = file
        self.staging = staging
        self.plan = plan
        self.cas = cas
        self.hash = hash
        queue = tasks.reversed()
        leaves = plan.terms.map { term in
            guard let record = done[XetFilePlan.key(term)] else { return nil }
            return XetFileFetch.leaves(of: record)
        }
        // A recorded term whose hashes do not decode is fetched again (its task was made above
        // only for terms without a record: such a term is counted as not written).
        written = zip(plan.terms, leaves).reduce(0) { $0 + ($1.1 == nil ? 0 : Int64($1.0.length)) }
        for term in plan.terms where leaves[term.index] == nil {
            guard let record = started[XetFilePlan.headKey(term)], let head = XetFileFetch.head(of: record, for: term) else { continue }
            heads[term.index] = head
            written += Int64(head.written)
        }
    }

    /// A recorded head of `term` as the ranges go on from it; nil when it does not fit the term.
    static func head(of record: XetDoneTerm, for term: XetPlacedTerm) -> TermHead? {
        guard record.chunkStart == term.chunks.lowerBound, record.chunkEnd > record.chunkStart,
              record.chunkEnd < term.chunks.upperBound, record.byteStart >= 0, record.byteEnd >= record.byteStart,
              let leaves = leaves(of: record) else { return nil }
        let written = leaves.reduce(0) { $0 + Int($1.length) }
        guard written < term.length else { return nil }
        return TermHead(leaves: leaves, written: written, byteStart: record.byteStart, byteEnd: record.byteEnd,
                        next: record.chunkEnd)
    }

    /// Where chunk `chunk` of term `index` goes in the file, nil when the term does not need it
    /// (it has it already, or it is not its next chunk). `at`: the chunk's first byte in the xorb.
    func placement(of chunk: Int, term index: Int, at: Int) -> Int64? {
        let term = plan.terms[index]
        return lock.withLock {
            var head = heads[index] ?? TermHead(next: term.chunks.lowerBound)
            guard chunk == head.next else { return nil }
            if head.leaves.isEmpty { head.byteStart = at }
            heads[index] = head
            return term.offset + Int64(head.written)
        }
    }

    /// Chunk `leaf` of term `index` is written (its stored bytes end at xorb byte `end`): the
    /// term's head grows, and when it is the term's last chunk the term is done.
    func chunkWritten(_ leaf: MerkleLeaf, term index: Int, end: Int) throws {
        let term = plan.terms[index]
        let finished: TermHead? = try lock.withLock {
            guard var head = heads[index] else { return nil }
            head.leaves.append(leaf)
            head.written += Int(leaf.length)
            head.byteEnd = end
            head.next += 1
            written += Int64(leaf.length)
            guard head.written <= term.length else {
                throw XetBadBytes(what: "term \(index) of xorb \(term.xorb.hex) decodes to more than its \(term.length) bytes")
            }
            if head.next < term.chunks.upperBound {
                heads[index] = head
                return nil
            }
            heads[index] = nil
            guard head.written == term.length else {
                throw XetBadBytes(what: "term \(index) of xorb \(term.xorb.hex) decodes to \(head.written) bytes, not \(term.length)")
            }
            return head
        }
        if let finished {
            termWritten(index, leaves: finished.leaves, byteStart: finished.byteStart, byteEnd: finished.byteEnd)
        }
    }

    /// The heads of the terms being written, as the staging record keeps them.
    var headRecords: [XetDoneTerm] {
        lock.withLock {
            heads.compactMap { index, head in
                guard !head.leaves.isEmpty else { return nil }
                let term = plan.terms[index]
                return XetDoneTerm(offset: term.offset, xorb: term.xorb.hex, chunkStart: term.chunks.lowerBound,
                                   chunkEnd: head.next, byteStart: head.byteStart, byteEnd: head.byteEnd,
                                   hashes: Data(head.leaves.flatMap(\.hash.bytes)).base64EncodedString(),
                                   lengths: head.leaves.map { Int($0.length) })
            }
        }
    }

    /// The bytes written so far.
    var writtenBytes: Int64 { lock.withLock { written } }

    /// The next range to fetch, nil when none is left or a range failed.
    func nextTask() -> XetRangeTask? {
        lock.withLock { failure == nil ? queue.popLast() : nil }
    }

    func fail(_ error: Error) { lock.withLock { if failure == nil { failure = error } } }
    var firstFailure: Error? { lock.withLock { failure } }
    var failed: Bool { lock.withLock { failure != nil } }

    /// Every term of the file with its chunks' hashes, as the staging record and the chunk
    /// index name them (xorb bytes unknown: -1); nil while a term is missing.
    var termRecords: [XetDoneTerm]? {
        lock.withLock {
            var records: [XetDoneTerm] = []
            for (term, termLeaves) in zip(plan.terms, leaves) {
                guard let termLeaves else { return nil }
                records.append(XetDoneTerm(offset: term.offset, xorb: term.xorb.hex, chunkStart: term.chunks.lowerBound,
                                           chunkEnd: term.chunks.upperBound, byteStart: -1, byteEnd: -1,
                                           hashes: Data(termLeaves.flatMap(\.hash.bytes)).base64EncodedString(),
                                           lengths: termLeaves.map { Int($0.length) }))
            }
            return records
        }
    }

    /// Every chunk of the file in order, nil while a term is missing.
    var allLeaves: [MerkleLeaf]? {
        lock.withLock {
            var all: [MerkleLeaf] = []
            for term in leaves {
                guard let term else { return nil }
                all += term
            }
            return all
        }
    }

    /// A term's every chunk is written: its hashes join the file's, and the staging record
    /// names it with its next persist.
    func termWritten(_ index: Int, leaves termLeaves: [MerkleLeaf], byteStart: Int, byteEnd: Int) {
        let term = plan.terms[index]
        var hashes: [UInt8] = []
        hashes.reserveCapacity(termLeaves.count * 32)
        for leaf in termLeaves { hashes += leaf.hash.bytes }
        lock.withLock { leaves[index] = termLeaves }
        staging.recordXetTerm(XetDoneTerm(offset: term.offset, xorb: term.xorb.hex, chunkStart: term.chunks.lowerBound,
                                          chunkEnd: term.chunks.upperBound, byteStart: byteStart, byteEnd: byteEnd,
                                          hashes: Data(hashes).base64EncodedString(), lengths: termLeaves.map { Int($0.length) }))
    }

    static func leaves(of record: XetDoneTerm) -> [MerkleLeaf]? {
        guard let data = Data(base64Encoded: record.hashes), data.count == record.lengths.count * 32,
              record.lengths.count == record.chunkEnd - record.chunkStart else { return nil }
        let bytes = [UInt8](data)
        return record.lengths.enumerated().map { i, length in
            MerkleLeaf(hash: XetHash(bytes: Array(bytes[(i * 32)..<(i * 32 + 32)])), length: UInt64(length))
        }
    }

    /// A fresh URL for `task`'s xorb (its pre-signed one expired): the reconstruction of its
    /// first term asked again.
    func freshURL(for task: XetRangeTask) throws -> String {
        let term = plan.terms[task.terms[0]]
        guard let page = try cas.reconstruction(of: hash, first: term.offset, last: term.offset + Int64(term.length) - 1, path: file.path),
              let fetch = page.fetches[task.xorb]?.first(where: {
                  $0.chunks.lowerBound <= task.chunks.lowerBound && task.chunks.upperBound <= $0.chunks.upperBound
              }) else {
            throw XetDownloadError.badReconstruction(path: file.path, reason: "a new reconstruction no longer names xorb \(task.xorb.hex)")
        }
        return fetch.url
    }
}
