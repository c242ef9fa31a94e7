// XetFilePlan - what one Xet-backed file needs: its terms placed at their file offsets (from the
// reconstruction's pages), and the xorb byte ranges that bring the terms not yet written. A page
// after the first starts where the last term of the one before ended, so no term is listed twice
// and the chunks, in term order, are the file's chunks for its Merkle root.
import Foundation
import HubClient
import HubTypes
import ModelCache
import Xet

/// A term of the file: chunks `chunks` of xorb `xorb`, `length` bytes at file offset `offset`.
struct XetPlacedTerm {
    let index: Int
    let offset: Int64
    let xorb: XetHash
    let chunks: Range<Int>
    let length: Int
}

/// One xorb byte range to fetch: chunks `chunks` (bytes `bytes` of the xorb, inclusive) from
/// `url`, and the terms (indices into the plan's terms) it writes.
struct XetRangeTask {
    let xorb: XetHash
    var url: String
    let chunks: Range<Int>
    let bytes: ClosedRange<Int>
    let terms: [Int]
}

struct XetFilePlan {
    let terms: [XetPlacedTerm]
    /// Per term, the fetch range of its xorb that covers it (chunks, bytes, url), as the
    /// reconstruction page that listed it gave it.
    let covering: [XetReconstruction.Fetch]

    /// Asks `cas` for the reconstruction of `file` page by page (`pageSize` bytes each).
    /// - Throws: `HubError` from the CAS, `XetDownloadError.badReconstruction` when the terms do
    ///   not make up the file.
    static func fetch(_ file: RepoFile, hash: String, cas: XetCAS, pageSize: Int64,
                      isCancelled: () -> Bool = { false }) throws -> XetFilePlan {
        var terms: [XetPlacedTerm] = []
        var covering: [XetReconstruction.Fetch] = []
        var offset: Int64 = 0
        func refuse(_ why: String) -> XetDownloadError { .badReconstruction(path: file.path, reason: why) }
        while offset < file.size {
            let last = min(file.size, offset + max(1, pageSize)) - 1
            if isCancelled() { throw CancellationError() }
            guard let page = try cas.reconstruction(of: hash, first: offset, last: last, path: file.path,
                                                    isCancelled: isCancelled) else {
                throw refuse("the CAS says byte \(offset) is past the end, but the file has \(file.size) bytes")
            }
            guard page.offsetIntoFirstRange == 0 else {
                throw refuse("the page from byte \(offset) does not start at a term (offset_into_first_range \(page.offsetIntoFirstRange))")
            }
            guard !page.terms.isEmpty else { throw refuse("the page from byte \(offset) has no terms") }
            for term in page.terms {
                guard let fetch = page.fetches[term.xorb]?.first(where: {
                    $0.chunks.lowerBound <= term.chunks.lowerBound && term.chunks.upperBound <= $0.chunks.upperBound
                }) else {
                    throw refuse("no fetch range of xorb \(term.xorb.hex) covers chunks \(term.chunks)")
                }
                terms.append(XetPlacedTerm(index: terms.count, offset: offset, xorb: term.xorb, chunks: term.chunks,
                                           length: term.unpackedLength))
                covering.append(fetch)
                offset += Int64(term.unpackedLength)
                if terms.count > XetReconstruction.maximumTerms {
                    throw refuse("more than \(XetReconstruction.maximumTerms) terms")
                }
            }
        }
        guard offset == file.size else {
            throw refuse("its terms make \(offset) bytes, the file has \(file.size)")
        }
        return XetFilePlan(terms: terms, covering: covering)
    }

    /// The xorb ranges that bring every term not in `done` (keyed by `key(_:)`). A fetch range
    /// whose terms are partly written is cut around them: each run of chunks still needed
    /// starts at the fetch range's start or right after a written term's bytes, and ends at
    /// the range's end or right before one, whose xorb bytes the record keeps.
    /// `started`: heads of pending terms (by `headKey`): such a term needs only the chunks after
    /// its head, which starts right after the head's recorded bytes.
    func tasks(skipping done: [String: XetDoneTerm], started: [String: XetDoneTerm] = [:]) -> [XetRangeTask] {
        // Terms grouped by the fetch range (url, xorb, chunks) that covers them.
        var groups: [String: (fetch: XetReconstruction.Fetch, xorb: XetHash, terms: [Int])] = [:]
        var order: [String] = []
        for term in terms {
            let fetch = covering[term.index]
            let key = "\(term.xorb.hex) \(fetch.chunks) \(fetch.url)"
            if groups[key] == nil { order.append(key); groups[key] = (fetch, term.xorb, []) }
            groups[key]?.terms.append(term.index)
        }
        var tasks: [XetRangeTask] = []
        for key in order {
            guard let group = groups[key] else { continue }
            let pending = group.terms.filter { done[XetFilePlan.key(terms[$0])] == nil }
            if pending.isEmpty { continue }
            // A pending term's head counts as written for the cut (its bytes are recorded too).
            let heads = pending.compactMap { i in
                started[XetFilePlan.headKey(terms[i])].flatMap { XetFileFetch.head(of: $0, for: terms[i]) == nil ? nil : $0 }
            }
            let written = group.terms.compactMap { done[XetFilePlan.key(terms[$0])] } + heads
            if written.isEmpty {
                tasks.append(XetRangeTask(xorb: group.xorb, url: group.fetch.url, chunks: group.fetch.chunks,
                                          bytes: group.fetch.bytes, terms: pending))
                continue
            }
            // Chunks some pending term needs, in runs; where a run starts or ends inside the
            // range, a written term's recorded bytes say where.
            var needed = Set<Int>()
            for i in pending {
                let head = started[XetFilePlan.headKey(terms[i])].flatMap { XetFileFetch.head(of: $0, for: terms[i]) }
                needed.formUnion((head?.next ?? terms[i].chunks.lowerBound)..<terms[i].chunks.upperBound)
            }
            // Terms taken from the chunk store have no xorb bytes recorded (-1).
            let located = written.filter { $0.byteStart >= 0 && $0.byteEnd >= $0.byteStart }
            let startByte = Dictionary(located.map { ($0.chunkStart, $0.byteStart) }, uniquingKeysWith: { a, _ in a })
            let endByte = Dictionary(located.map { ($0.chunkEnd, $0.byteEnd) }, uniquingKeysWith: { a, _ in a })
            var runs: [XetRangeTask] = []
            var chunk = group.fetch.chunks.lowerBound
            var cut = false
            while chunk < group.fetch.chunks.upperBound {
                guard needed.contains(chunk) else { chunk += 1; continue }
                var end = chunk
                while end < group.fetch.chunks.upperBound && needed.contains(end) { end += 1 }
                let first = chunk == group.fetch.chunks.lowerBound ? group.fetch.bytes.lowerBound : endByte[chunk].map { $0 + 1 }
                let last = end == group.fetch.chunks.upperBound ? group.fetch.bytes.upperBound : startByte[end].map { $0 - 1 }
                guard let first, let last, first <= last else { cut = true; break }
                let run = chunk..<end
                runs.append(XetRangeTask(xorb: group.xorb, url: group.fetch.url, chunks: run, bytes: first...last,
                                         terms: pending.filter { run.contains(terms[$0].chunks.upperBound - 1) }))
                chunk = end
            }
            if cut {
                // The record does not say where a run starts (chunks no term names lie between
                // them): the whole range again, writing only the pending terms.
                runs = [XetRangeTask(xorb: group.xorb, url: group.fetch.url, chunks: group.fetch.chunks,
                                     bytes: group.fetch.bytes, terms: pending)]
            }
            tasks += runs
        }
        return tasks
    }

    /// A term's identity in the staging record: its offset, xorb and chunks.
    static func key(_ term: XetPlacedTerm) -> String {
        "\(term.offset) \(term.xorb.hex) \(term.chunks.lowerBound) \(term.chunks.upperBound)"
    }

    static func key(_ term: XetDoneTerm) -> String {
        "\(term.offset) \(term.xorb) \(term.chunkStart) \(term.chunkEnd)"
    }

    /// A term's identity for its head (a head ends before the term does).
    static func headKey(_ term: XetPlacedTerm) -> String {
        "\(term.offset) \(term.xorb.hex) \(term.chunks.lowerBound)"
    }

    static func headKey(_ head: XetDoneTerm) -> String {
        "\(head.offset) \(head.xorb) \(head.chunkStart)"
    }
}
