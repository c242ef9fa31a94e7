// RangeFetch - one byte range of one file into its own part file: what a worker process does
// with a claimed job. Same checks, retries and stall guard as the in-process engine.
import Curl
import Foundation
import HubClient
import ModelCache

public final class RangeFetch: @unchecked Sendable {
    public let client: HubClient
    public let settings: DownloadSettings
    private let session: CurlEasy
    /// Where each file's bytes are, located once per process (key: repo@commit/path).
    private var locations: [String: String] = [:]

    /// - Throws: `CurlUnavailable` when libcurl cannot be loaded.
    public init(client: HubClient, settings: DownloadSettings) throws {
        try CurlLibrary.load()
        self.client = client
        self.settings = settings.normalized()
        session = CurlEasy()
    }

    /// Fetches bytes `start...end` of `file` into a new file at `partPath`; fsyncs it when `sync`
    /// (a caller that publishes the part later may sync it on its own time).
    /// `onProgress` is called as bytes arrive (a lease refresh); `isCancelled` stops the fetch.
    /// - Throws: `HubError` when the range cannot be had (non-retryable answer, retries exhausted).
    public func fetch(_ file: RepoFile, repo: RepoID, commit: String, start: Int64, end: Int64, into partPath: String,
                      sync: Bool = true, onProgress: @escaping () -> Void = {},
                      isCancelled: @escaping () -> Bool = { false }) throws {
        let fd = SharedFS.retry { open(partPath, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw CacheError.io(path: partPath, operation: "create part", errno: errno) }
        defer { close(fd) }
        let key = "\(repo)@\(commit)/\(file.path)"
        var written: Int64 = 0
        var attempt = 0
        var redirects = 0
        var url = try locations[key] ?? locate(file, repo: repo, commit: commit, key: key)
        var pinnedEtag: String?
        while true {
            if isCancelled() { throw CancellationError() }
            attempt += 1
            var failure: JobFailure?
            var writeError: Error?
            let from = start + written
            var request = HTTPRequest(url: url, headers: client.headers(for: url),
                                      connectTimeout: settings.connectTimeout, stallTimeout: settings.stallTimeout)
            request.range = (from, end)
            let requestURL = url
            session.prepare(request, onResponse: { status, headers in
                switch RangeResponse.verdict(status: status, headers: headers, url: requestURL, from: from, end: end,
                                             size: file.size, ranged: true,
                                             isHubOrigin: self.client.endpoint.isSameOrigin(requestURL)) {
                case .stream(let etag):
                    if let etag, let pinned = pinnedEtag, etag != pinned {
                        failure = .changedOnServer("ETag changed from \(pinned) to \(etag)")
                        return .abort
                    }
                    pinnedEtag = etag ?? pinnedEtag
                    return .stream
                case .refuse(let why):
                    failure = why
                    return .abort
                case .errorBody:
                    return .collect(limit: 64 << 10)
                }
            }, onBody: { bytes in
                let room = end - (start + written) + 1
                let take = Int(min(Int64(bytes.count), max(0, room)))
                var done = 0
                while done < take {
                    let n = pwrite(fd, bytes.baseAddress! + done, take - done, off_t(written + Int64(done)))
                    if n < 0 {
                        if errno == EINTR { continue }
                        writeError = CacheError.io(path: partPath, operation: "write", errno: errno)
                        return false
                    }
                    done += n
                }
                written += Int64(take)
                onProgress()
                if take < bytes.count { failure = .overflow; return false }
                return !isCancelled()
            })
            let error: HubError
            switch session.performBlocking() {
            case .response(let response) where (200..<300).contains(response.status):
                if start + written == end + 1 {
                    guard !sync || fsync(fd) == 0 else { throw CacheError.io(path: partPath, operation: "sync", errno: errno) }
                    return
                }
                error = .transport(TransportError(code: 18, message: "body ended after \(written) of \(end - start + 1) bytes", url: url))
            case .response(let response):
                error = HubError.from(response, repo: repo, revision: commit, path: file.path)
            case .transport(let transport):
                error = .transport(transport)
            case .aborted(let status, _):
                if let writeError { throw writeError }
                if isCancelled() { throw CancellationError() }
                switch failure {
                case .redirect(let target):
                    redirects += 1
                    guard redirects <= 10 else { throw HubError.badResponse(url: url, reason: "too many redirects") }
                    url = target
                    attempt -= 1
                    continue
                case .expiredLocation:
                    url = try locate(file, repo: repo, commit: commit, key: key)
                    error = .http(status: 403, url: url, message: "the download location expired", retryAfter: nil)
                case .rangeIgnored:
                    throw HubError.badResponse(url: url, reason: "the server ignores Range requests, which worker processes need; run `speech download` without a daemon")
                case .changedOnServer(let why):
                    throw HubError.badResponse(url: url, reason: "\(file.path) changed on the server during the transfer (\(why))")
                case .badRange(let why):
                    error = .badResponse(url: url, reason: why)
                case .overflow:
                    throw HubError.badResponse(url: url, reason: "the server sent more bytes than its Content-Range promised")
                case .write(let e):
                    throw e
                case nil:
                    error = .badResponse(url: url, reason: "transfer stopped (HTTP \(status))")
                }
            }
            let retryable: Bool
            switch error {
            case .badResponse: retryable = true
            case .http(403, _, _, _) where failure != nil: retryable = true
            default: retryable = error.isRetryable
            }
            guard retryable, attempt < settings.retry.attempts else { throw error }
            Sleep.seconds(settings.retry.delay(afterAttempt: attempt, retryAfter: error.retryAfter), unless: isCancelled)
        }
    }

    private func locate(_ file: RepoFile, repo: RepoID, commit: String, key: String) throws -> String {
        let url: String
        if file.isLFS || file.size >= settings.rangeThreshold {
            url = try client.locate(repo, commit: commit, path: file.path).url
        } else {
            url = client.resolveURL(repo, commit: commit, path: file.path)
        }
        locations[key] = url
        return url
    }
}
