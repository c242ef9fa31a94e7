// RangeAttemptPolicy - what the end of one attempt at a byte range means: done, try again
// after a delay, follow a redirect, ask the Hub for a fresh CDN location, restart the file as
// one stream, or fail with a typed error. The embedded engine's loop and a worker's fetch both
// ask it, so the two hosts answer every outcome the same way.
import Curl
import Foundation
import HubClient
import HubTypes

/// The next step for a range after an attempt ended.
enum RangeDecision {
    /// Every byte of the range is on disk.
    case complete
    /// Ask again for the bytes still missing (from the writer's first missing byte) after `delay` seconds.
    case retry(delay: Double, cause: HubError)
    /// A redirect: ask the target at once (not an attempt).
    case follow(String)
    /// The CDN location expired: ask the Hub where the file is now, then ask again at once.
    case locateAgain
    /// The server ignored Range: forget the file's ranges and fetch it from byte 0 as one stream.
    case restartAsOneStream
    case fail(Error)
}

/// Attempts and redirects one range has used.
struct RangeAttemptCount {
    var attempts = 0
    var redirects = 0
}

/// Which file a range belongs to, for error messages and typed Hub errors.
struct RangeContext {
    let repo: RepoID
    let commit: String
    let path: String
    let url: String
}

struct RangeAttemptPolicy: Sendable {
    /// Attempts and the delays between them (`Retry-After` wins, capped).
    var retry: RetryPolicy
    /// The Hub the transfer talks to: an https endpoint's transfers are never downgraded to
    /// http by a redirect (nil: only the http/https rule applies).
    var endpoint: HubEndpoint? = nil
    var maxRedirects = 10
    /// The embedded engine can answer a server that ignores Range by fetching the whole file;
    /// a worker, which owns one range's part, cannot.
    var canRestartAsOneStream: Bool

    /// Decides after an attempt that ended with `result`; `writer` holds what reached the disk
    /// and why our checks stopped the attempt, if they did. Counts the attempt in `count`.
    func decide(_ result: CurlResult, writer: RangeWriter, count: inout RangeAttemptCount,
                context: RangeContext) -> RangeDecision {
        let url = context.url
        let cause: HubError
        switch result {
        case .response(let response) where (200..<300).contains(response.status):
            if writer.isComplete { return .complete }
            cause = .transport(TransportError(code: 18, message: "body ended after \(writer.written) of \(writer.length) bytes",
                                              url: url))
        case .response(let response):
            cause = HubError.from(response, repo: context.repo, revision: context.commit, path: context.path)
        case .tooLarge(let status, _, let limit):
            // An error page that never ends: its status is not trusted to mean "try again".
            return .fail(HubError.badResponse(url: url, reason: BodyTooLarge(url: url, status: status, limit: limit).reason))
        case .transport(let error):
            // A connection that closed after the last byte of the range (fewer bytes than its
            // Content-Length promised, a reset) still delivered the whole range: asking for the
            // bytes after it would be an empty, inverted range.
            if writer.isComplete { return .complete }
            cause = .transport(error)
        case .aborted(let status, _):
            switch writer.refusal {
            case .redirect(let target):
                count.redirects += 1
                guard count.redirects <= maxRedirects else {
                    return .fail(HubError.badResponse(url: url, reason: "too many redirects (more than \(maxRedirects) in a row: a loop?)"))
                }
                do {
                    try HubClient.checkRedirect(from: url, to: target, endpoint: endpoint)
                } catch {
                    return .fail(error)
                }
                return .follow(target)
            case .rangeIgnored:
                guard canRestartAsOneStream else {
                    return .fail(HubError.badResponse(url: url, reason: "the server ignores Range requests, which worker processes need; run `speech download` without a daemon"))
                }
                return .restartAsOneStream
            case .expiredLocation:
                count.attempts += 1
                guard count.attempts < retry.attempts else {
                    return .fail(HubError.http(status: 403, url: url, message: "the download location keeps expiring", retryAfter: nil))
                }
                return .locateAgain
            case .changedOnServer(let why):
                return .fail(HubError.badResponse(url: url, reason: "\(context.path) changed on the server during the transfer (\(why)); run the download again"))
            case .write(let error):
                return .fail(error)
            case .overflow:
                return .fail(HubError.badResponse(url: url, reason: "the server sent more bytes than its Content-Range promised"))
            case .badRange(let why):
                cause = .badResponse(url: url, reason: why)
            case nil:
                if writer.isComplete { return .complete }
                cause = .badResponse(url: url, reason: "transfer stopped (HTTP \(status))")
            }
        }
        count.attempts += 1
        guard let delay = retry.delayBeforeNextAttempt(after: count.attempts, failure: cause, retryingBadAnswers: true) else {
            return .fail(cause)
        }
        return .retry(delay: delay, cause: cause)
    }
}
