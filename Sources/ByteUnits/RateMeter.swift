// RateMeter - bytes per second over the last seconds, and the time left at that rate: the one
// measure of a transfer's rate (the engine's progress, a waiter's, `speech status`).
import Foundation

/// The rate of a growing byte count, from counts seen at irregular instants (a waiter sees a
/// part when it is published, not each byte received).
public struct RateMeter: Sendable {
    private var samples: [(time: Double, bytes: Int64)] = []
    /// The seconds the rate is measured over: samples older than that go, except the one just
    /// before the window (sparse samples still give a rate, over a longer span).
    public let window: Double

    public init(window: Double = 5) { self.window = window }

    /// Records the count at `now` (seconds on any one clock); returns the rate over the window,
    /// 0 until two samples are more than 50 ms apart, never negative (a restart that forgets bytes).
    public mutating func add(_ bytes: Int64, now: Double = Date().timeIntervalSinceReferenceDate) -> Double {
        samples.append((now, bytes))
        while samples.count > 2, now - samples[1].time >= window { samples.removeFirst() }
        guard let first = samples.first, now - first.time > 0.05 else { return 0 }
        return Double(max(0, bytes - first.bytes)) / (now - first.time)
    }

    /// Seconds until `remaining` bytes arrive at `bytesPerSecond`; nil when nothing moves.
    public static func eta(remaining: Int64, bytesPerSecond: Double) -> Double? {
        bytesPerSecond > 0 ? Double(remaining) / bytesPerSecond : nil
    }
}
