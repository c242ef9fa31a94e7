// RetryEvent - one retry about to happen, told to whoever watches (the command line prints a
// line, `--json` an event, the daemon a log line) the moment the failure is seen.
import Foundation
import Synchronization

/// A failed attempt that will be tried again after `wait` seconds.
public struct RetryEvent: Sendable {
    /// What failed: a repo file's path, or the Hub URL of an API call.
    public let subject: String
    /// Why, in the error's own words.
    public let reason: String
    /// The attempt about to start (2 after the first failure) and how many there may be.
    public let attempt: Int
    public let attempts: Int
    /// Seconds until that attempt.
    public let wait: Double
    /// True when nothing answered at all (connection refused, no DNS): a cold cache cannot be served.
    public let isUnreachable: Bool

    public init(subject: String, error: HubError, attempt: Int, attempts: Int, wait: Double) {
        self.subject = subject
        self.reason = "\(error)"
        self.attempt = attempt
        self.attempts = attempts
        self.wait = wait
        self.isUnreachable = error.isUnreachable
    }
}

/// The process's one retry watcher. Retries happen deep in the engine and the Hub client, on
/// their threads; the watcher must return quickly.
public enum RetryEvents {
    private static let watcher = Mutex<(@Sendable (RetryEvent) -> Void)?>(nil)

    /// Sets the watcher (nil: none).
    public static func watch(_ body: (@Sendable (RetryEvent) -> Void)?) {
        watcher.withLock { $0 = body }
    }

    /// Tells the watcher, if any.
    public static func report(_ event: RetryEvent) {
        let body = watcher.withLock { $0 }
        body?(event)
    }
}

extension HubError {
    /// The URL the failed request went to, when the error names one.
    public var url: String? {
        switch self {
        case .http(_, let url, _, _), .badResponse(let url, _): return url
        case .transport(let error): return error.url
        default: return nil
        }
    }
}
