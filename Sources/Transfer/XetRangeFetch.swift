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

/// Runs range tasks of a file on one handle.
struct XetRangeFetch {
    let settings: DownloadSettings
    let cap: RateCap?
    let isCancelled: @Sendable () -> Bool

    /// Fetches `task` into the file of `fetch`.
    /// - Throws: `XetBadBytes` (bytes that do not decode or do not fit their term: the file is
    ///   fetched again from scratch), `HubError` (retries used up, a final answer), `CacheError`
    ///   (the disk), `CancellationError`.
    func run(_ task: XetRangeTask, of fetch: XetFileFetch, on easy: CurlEasy) throws {
        let terms = fetch.plan.terms
        var termsOfChunk: [Int: [Int]] = [:]
        for i in task.terms {
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
                        try place(chunk, at: next, termsOfChunk: termsOfChunk, fetch: fetch)
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
    /// every term of the task that needs it next; a term whose last chunk this is is done.
    private func place(_ chunk: DecodedChunk, at: Int, termsOfChunk: [Int: [Int]], fetch: XetFileFetch) throws {
        for i in termsOfChunk[chunk.index] ?? [] {
            guard let offset = fetch.placement(of: chunk.index, term: i, at: at) else { continue }
            try chunk.bytes.withUnsafeBytes { try fetch.staging.write($0, at: offset) }
            try fetch.chunkWritten(MerkleLeaf(hash: chunk.hash, length: UInt64(chunk.bytes.count)), term: i,
                                   end: at + chunk.storedBytes - 1)
        }
    }
}
