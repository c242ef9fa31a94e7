// RangeFetch - one byte range of one file into its own part file: what a worker process does
// with a claimed job. A thin driver of the same `RangeWriter` and `RangeAttemptPolicy` the
// embedded engine's loop drives, on one blocking connection.
import Curl
import Foundation
import HubClient
import HubTypes
import ModelCache

public final class RangeFetch: @unchecked Sendable {
    public let client: HubClient
    public let settings: DownloadSettings
    private let session: CurlEasy
    private let locator: FileLocator
    private let policy: RangeAttemptPolicy
    /// Where each file's bytes are, located once per process (key: repo@commit/path).
    private var locations: [String: String] = [:]
    /// The node's bandwidth cap (`speech-fetchd --max-rate`), shared with every worker.
    private let cap: RateCap?

    /// - Throws: `CurlUnavailable` when libcurl cannot be loaded; `RateCapUnavailable` when the
    ///   node's rate schedule cannot be opened.
    public init(client: HubClient, settings: DownloadSettings) throws {
        try CurlLibrary.load()
        if let rate = settings.nodeMaxRate, let schedule = settings.nodeRateSchedule {
            cap = try RateCap(bytesPerSecond: rate, schedule: schedule)
        } else {
            cap = nil
        }
        self.client = client
        self.settings = settings.normalized()
        session = CurlEasy()
        locator = FileLocator(client: client, rangeThreshold: self.settings.rangeThreshold)
        policy = RangeAttemptPolicy(retry: self.settings.retry, endpoint: client.endpoint, canRestartAsOneStream: false)
    }

    /// Fetches bytes `start...end` of `file` into a new file at `partPath`; fsyncs it when `sync`
    /// (a caller that publishes the part later may sync it on its own time).
    /// `onProgress` is called with the bytes the part holds as they arrive, and at least once a
    /// second while the fetch runs
    /// (a lease refresh: a connection waiting for bytes, within its stall timeout, or a retry's
    /// wait is a live fetch too); `isCancelled` stops the fetch, also while no byte arrives.
    /// - Throws: `HubError` when the range cannot be had (non-retryable answer, retries exhausted).
    /// `resumeFrom`: bytes of the range an adopted part at `partPath` already holds; only the
    /// rest is asked for.
    /// `staging`: the staging file's descriptor, to write the range in place (its caller syncs and
    /// closes it); `partPath` is then the range's progress record (`PartFile`), and `resumeFrom`
    /// the bytes an adopted record says are written.
    public func fetch(_ file: RepoFile, repo: RepoID, commit: String, start: Int64, end: Int64, into partPath: String,
                      staging: Int32? = nil, resumeFrom: Int64 = 0, sync: Bool = true, onProgress: @escaping (Int64) -> Void = { _ in },
                      isCancelled: @escaping () -> Bool = { false }) throws {
        let part = try PartFile(path: partPath, origin: start, keep: resumeFrom > 0, staging: staging, held: resumeFrom)
        let writer = RangeWriter(start: start, end: end, fileSize: file.size, into: part, pin: EtagPin(),
                                 alreadyWritten: resumeFrom)
        if writer.isComplete {
            try sync ? part.sync() : part.finish()
            return
        }
        writer.onWritten = { [weak writer] _ in onProgress((writer?.next ?? start) - start) }
        let key = "\(repo)@\(commit)/\(file.path)"
        var url = try locations[key] ?? locator.source(of: file, repo: repo, commit: commit)
        locations[key] = url
        var count = RangeAttemptCount()
        while true {
            if isCancelled() { throw CancellationError() }
            writer.beginAttempt()
            var request = HTTPRequest(url: url, headers: client.headers(for: url),
                                      connectTimeout: settings.connectTimeout, stallTimeout: settings.stallTimeout)
            request.range = (writer.next, end)
            request.receiveBufferSize = cap?.readSize
            let cap = cap
            let isHubOrigin = client.endpoint.isSameOrigin(url)
            // Weakly: the handle keeps its callbacks until its next request, and the part file
            // must be closed when this fetch returns (it is published or deleted next).
            session.prepare(request, onResponse: { [url, weak writer] status, headers in
                writer?.accept(status: status, headers: headers, url: url, ranged: true, isHubOrigin: isHubOrigin) ?? .abort
            }, onBody: { [weak writer] bytes in
                cap?.take(bytes.count)  // the node's cap: this thread waits its turn (RateCap)
                return (writer?.write(bytes) ?? false) && !isCancelled()
            }, onTick: { [weak writer, weak part] in
                try? part?.flushIfStale()  // a stalled transfer's bytes reach the file (others judge stalls by them)
                onProgress((writer?.next ?? start) - start)
                return !isCancelled()
            })
            let decision = policy.decide(session.performBlocking(), writer: writer, count: &count,
                                         context: RangeContext(repo: repo, commit: commit, path: file.path, url: url))
            if case .complete = decision {
                try sync ? part.sync() : part.finish()
                return
            }
            if isCancelled() { throw CancellationError() }
            switch decision {
            case .complete:
                return
            case .retry(let delay, let cause):
                RetryEvents.report(RetryEvent(subject: file.path, error: cause, attempt: count.attempts + 1,
                                              attempts: policy.retry.attempts, wait: delay))
                Sleep.seconds(delay) { [weak writer] in
                    onProgress((writer?.next ?? start) - start)
                    return isCancelled()
                }
            case .follow(let target):
                url = target
            case .locateAgain:
                url = try locator.locate(file, repo: repo, commit: commit)
                locations[key] = url
            case .restartAsOneStream:  // not offered to a worker (`canRestartAsOneStream` is false)
                throw HubError.badResponse(url: url, reason: "the server ignores Range requests")
            case .fail(let error):
                throw error
            }
        }
    }
}
