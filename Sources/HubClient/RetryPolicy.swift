// RetryPolicy - the retry ladder shared by API calls and range transfers.
import Foundation

/// Five attempts with 5/15/30/60 s between them by default; `Retry-After` wins when the server sends it.
public struct RetryPolicy: Sendable, Equatable {
    public var attempts: Int
    /// Delay before attempt 2, 3, ...; the last value repeats.
    public var delays: [Double]
    /// Upper bound on a server's `Retry-After`, so a hostile value cannot park a download for hours.
    public var maxRetryAfter: Double

    public init(attempts: Int = 5, delays: [Double] = [5, 15, 30, 60], maxRetryAfter: Double = 300) {
        self.attempts = max(1, attempts)
        self.delays = delays.isEmpty ? [0] : delays
        self.maxRetryAfter = maxRetryAfter
    }

    /// Seconds to wait after failed attempt number `attempt` (1-based).
    public func delay(afterAttempt attempt: Int, retryAfter: Double?) -> Double {
        if let after = retryAfter { return min(max(0, after), maxRetryAfter) }
        return delays[min(attempt - 1, delays.count - 1)]
    }

    /// The schedule's one rule, for API calls and byte ranges alike: seconds to wait before the
    /// next attempt after attempt number `attempt` failed with `failure`, or nil when that
    /// failure is final (an answer such as 401 or 404) or the attempts are used up.
    /// `retryingBadAnswers` also retries an answer that could not be used (a range transfer's
    /// wrong Content-Range or cut-off body, which a later attempt may get right).
    public func delayBeforeNextAttempt(after attempt: Int, failure: HubError, retryingBadAnswers: Bool = false) -> Double? {
        var retryable = failure.isRetryable
        if case .badResponse = failure, retryingBadAnswers { retryable = true }
        guard retryable, attempt < attempts else { return nil }
        return delay(afterAttempt: attempt, retryAfter: failure.retryAfter)
    }

    /// Runs `body` (one API call) until it succeeds or `delayBeforeNextAttempt` says stop.
    /// `shouldStop` lets a cancelled caller end the ladder early. `firstContact`: the call is the
    /// first one to the endpoint (a revision's resolution); when its first attempt finds nothing
    /// there at all (`HubError.isUnreachable`: no DNS, refused, no route) it fails at once
    /// instead of waiting through the ladder for a network that is not there
    /// (docs/cache-and-offline.md, "When the Hub cannot be reached").
    public func run<T>(firstContact: Bool = false, shouldStop: () -> Bool = { false }, _ body: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try body()
            } catch let error as HubError {
                if firstContact && attempt == 1 && error.isUnreachable { throw error }
                guard !shouldStop(), let delay = delayBeforeNextAttempt(after: attempt, failure: error) else { throw error }
                RetryEvents.report(RetryEvent(subject: error.url ?? "the Hub", error: error, attempt: attempt + 1, attempts: attempts, wait: delay))
                Sleep.seconds(delay, unless: shouldStop)
                attempt += 1
            }
        }
    }
}

/// Interruptible sleeping in small steps.
public enum Sleep {
    public static func seconds(_ seconds: Double, unless stop: () -> Bool) {
        // systemUptime is CLOCK_MONOTONIC: a wall clock set back must not stretch the sleep.
        let end = ProcessInfo.processInfo.systemUptime + seconds
        while !stop() {
            let left = end - ProcessInfo.processInfo.systemUptime
            if left <= 0 { return }
            Thread.sleep(forTimeInterval: min(left, 0.05))
        }
    }
}
