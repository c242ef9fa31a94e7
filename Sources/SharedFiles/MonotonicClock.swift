// MonotonicClock - CLOCK_MONOTONIC, one clock for every process of a machine (never set back):
// what schedules, ages and timeouts shared between this machine's processes are measured by.
// (Transfer's RateCap reads it itself: scenario 7 of scripts/bench compiles that file alone.)
import Foundation

public enum MonotonicClock {
    /// Nanoseconds since an unspecified point (the machine's boot, on Linux).
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// The same in seconds.
    public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}
