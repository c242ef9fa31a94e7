// XetRangeFetch - one xorb byte range on one blocking libcurl handle: each chunk decoded and
// hashed where it arrives (XorbRangeDecoder), its bytes written at the file offset of every term
// that names it, a term recorded once its last chunk is written. The retry ladder and the stall
// guard apply to every attempt; an attempt that stops resumes at the first chunk not yet decoded
// (the bytes before it are on disk), so no chunk is fetched twice beyond the one in flight.
import Curl
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

    init(file: RepoFile, staging: StagingFile, plan: XetFilePlan, cas: XetCAS, hash: String,
         done: [String: XetDoneTerm], tasks: [XetRangeTask]) {
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
    }

    /// The bytes written so far.
    var writtenBytes: Int64 { lock.withLock { written } }

    func add(_ bytes: Int) { lock.withLock { written += Int64(bytes) } }

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

/// Runs range tasks of a file on one handle.
struct XetRangeFetch {
    let settings: DownloadSettings
    let cap: RateCap?
    let isCancelled: @Sendable () -> Bool

    /// What one term of the task has written so far.
    private struct TermProgress {
        var written = 0
        var leaves: [MerkleLeaf] = []
        var byteStart = 0
    }

    /// Fetches `task` into the file of `fetch`.
    /// - Throws: `XetBadBytes` (bytes that do not decode or do not fit their term: the file is
    ///   fetched again from scratch), `HubError` (retries used up, a final answer), `CacheError`
    ///   (the disk), `CancellationError`.
    func run(_ task: XetRangeTask, of fetch: XetFileFetch, on easy: CurlEasy) throws {
        let terms = fetch.plan.terms
        var progress: [Int: TermProgress] = [:]
        var termsOfChunk: [Int: [Int]] = [:]
        for i in task.terms {
            progress[i] = TermProgress()
            for chunk in terms[i].chunks { termsOfChunk[chunk, default: []].append(i) }
        }
        var url = task.url
        var next = task.bytes.lowerBound
        var nextChunk = task.chunks.lowerBound
        var attempts = 0
        while true {
            if isCancelled() { throw CancellationError() }
            if fetch.failed { return }
            var request = HTTPRequest(url: url, headers: [], connectTimeout: settings.connectTimeout, stallTimeout: settings.stallTimeout)
            request.range = (Int64(next), Int64(task.bytes.upperBound))
            request.receiveBufferSize = cap?.readSize
            var decoder = XorbRangeDecoder(firstChunkIndex: nextChunk)
            var refusal: String?
            var expired = false
            var stop: Error?
            let first = next
            let last = task.bytes.upperBound
            easy.prepare(request, onResponse: { status, headers in
                switch status {
                case 206:
                    guard let got = RangeResponse.parseContentRange(headers["Content-Range"]), got.start == Int64(first),
                          got.end == Int64(last) else {
                        refusal = "Content-Range '\(headers["Content-Range"] ?? "none")' does not match bytes \(first)-\(last)"
                        return .abort
                    }
                    return .stream
                case 200:
                    refusal = "the xorb URL ignored Range"
                    return .abort
                case 403:
                    expired = true
                    return .abort
                default:
                    return .collect(limit: BodyLimit.errorPage)
                }
            }, onBody: { bytes in
                if isCancelled() || fetch.failed { return false }
                cap?.take(bytes.count)
                do {
                    for chunk in try decoder.feed(bytes) {
                        try place(chunk, at: next, terms: terms, progress: &progress, termsOfChunk: termsOfChunk, fetch: fetch)
                        next += chunk.storedBytes
                        nextChunk = chunk.index + 1
                    }
                    return true
                } catch let error as XetFormatError {
                    stop = XetBadBytes(what: "a chunk of xorb \(task.xorb.hex) did not decode (\(error))")
                } catch {
                    stop = error
                }
                return false
            })
            let result = easy.performBlocking()
            if let stop { throw stop }
            if nextChunk == task.chunks.upperBound { return }
            if isCancelled() { throw CancellationError() }
            if fetch.failed { return }
            let cause: HubError
            switch result {
            case .response(let response) where (200..<300).contains(response.status):
                cause = .transport(TransportError(code: 18, message: "the xorb range ended \(task.bytes.upperBound - next + 1) bytes early", url: url))
            case .response(let response):
                cause = .http(status: response.status, url: url, message: String(decoding: response.body.prefix(200), as: UTF8.self),
                              retryAfter: HubError.retryAfterSeconds(response.headers["Retry-After"]))
            case .tooLarge(let status, _, _):
                cause = .http(status: status, url: url, message: "an endless error page", retryAfter: nil)
            case .transport(let error):
                cause = .transport(error)
            case .aborted(let status, _):
                if expired {
                    attempts += 1
                    guard attempts < settings.retry.attempts else {
                        throw HubError.http(status: 403, url: url, message: "the xorb URL keeps expiring", retryAfter: nil)
                    }
                    url = try fetch.freshURL(for: task)
                    continue
                }
                cause = .badResponse(url: url, reason: refusal ?? "transfer stopped (HTTP \(status))")
            }
            // An attempt that brought chunks starts the ladder over: only attempts in a row that
            // bring nothing use it up.
            attempts = next > first ? 1 : attempts + 1
            guard let delay = settings.retry.delayBeforeNextAttempt(after: attempts, failure: cause, retryingBadAnswers: true) else {
                throw cause
            }
            RetryEvents.report(RetryEvent(subject: fetch.file.path, error: cause, attempt: attempts + 1,
                                          attempts: settings.retry.attempts, wait: delay))
            Sleep.seconds(delay) { isCancelled() || fetch.failed }  // another range failing ends the wait too
        }
    }

    /// Writes a decoded chunk (whose stored bytes start at xorb byte `at`) at the file offset of
    /// every term of the task that names it; a term whose last chunk this is is done.
    private func place(_ chunk: DecodedChunk, at: Int, terms: [XetPlacedTerm], progress: inout [Int: TermProgress],
                       termsOfChunk: [Int: [Int]], fetch: XetFileFetch) throws {
        for i in termsOfChunk[chunk.index] ?? [] {
            let term = terms[i]
            guard var p = progress[i] else { continue }
            if chunk.index == term.chunks.lowerBound {
                p = TermProgress()
                p.byteStart = at
            }
            guard p.written + chunk.bytes.count <= term.length else {
                throw XetBadBytes(what: "term \(i) of xorb \(term.xorb.hex) decodes to more than its \(term.length) bytes")
            }
            try chunk.bytes.withUnsafeBytes { try fetch.staging.write($0, at: term.offset + Int64(p.written)) }
            p.written += chunk.bytes.count
            p.leaves.append(MerkleLeaf(hash: chunk.hash, length: UInt64(chunk.bytes.count)))
            fetch.add(chunk.bytes.count)
            if chunk.index == term.chunks.upperBound - 1 {
                guard p.written == term.length else {
                    throw XetBadBytes(what: "term \(i) of xorb \(term.xorb.hex) decodes to \(p.written) bytes, not \(term.length)")
                }
                fetch.termWritten(i, leaves: p.leaves, byteStart: p.byteStart, byteEnd: at + chunk.storedBytes - 1)
            }
            progress[i] = p
        }
    }
}
