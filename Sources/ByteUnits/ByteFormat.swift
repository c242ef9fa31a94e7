// ByteFormat - byte counts and rates as people read them, for every message, log line and
// command's output: the one formatting of sizes (1024-based units).
import Foundation

public enum ByteFormat {
    private static let units = ["B", "KiB", "MiB", "GiB", "TiB"]

    /// 512 B, 1.5 KiB, 3.2 GiB.
    public static func string(_ n: Int64) -> String {
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }

    /// "12.3 MiB (12897484 bytes)", "512 bytes": a size a user may act on (free space, needed
    /// space), exact as well as readable.
    public static func withExactBytes(_ n: Int64) -> String {
        n < 1024 ? "\(n) bytes" : "\(string(n)) (\(n) bytes)"
    }

    /// "2.0 MiB", also for 3 KiB or 5 GiB: a log's one unit, so its lines compare at a glance.
    public static func mebibytes(_ n: Int64) -> String { String(format: "%.1f MiB", Double(n) / 1_048_576) }

    /// `2.0 MiB/s`, `512 B/s`: a rate.
    public static func rate(_ bytesPerSecond: Int64) -> String { string(bytesPerSecond) + "/s" }
}
