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

    /// Runs `body` until it succeeds, fails with a non-retryable error, or attempts run out.
    /// `shouldStop` lets a cancelled caller end the ladder early.
    public func run<T>(shouldStop: () -> Bool = { false }, _ body: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try body()
            } catch let error as HubError where error.isRetryable && attempt < attempts && !shouldStop() {
                let wait = delay(afterAttempt: attempt, retryAfter: error.retryAfter)
                RetryEvents.report(RetryEvent(subject: error.url ?? "the Hub", error: error, attempt: attempt + 1, attempts: attempts, wait: wait))
                Sleep.seconds(wait, unless: shouldStop)
                attempt += 1
            }
        }
    }
}

/// Interruptible sleeping in small steps.
public enum Sleep {
    public static func seconds(_ seconds: Double, unless stop: () -> Bool) {
        let end = Date().addingTimeInterval(seconds)
        while !stop() {
            let left = end.timeIntervalSinceNow
            if left <= 0 { return }
            Thread.sleep(forTimeInterval: min(left, 0.05))
        }
    }
}
