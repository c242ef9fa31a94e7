// ByteFormat - byte counts as people read them, for every command's output.
import Foundation

public enum ByteFormat {
    /// 512 B, 1.5 KiB, 3.2 GiB.
    public static func string(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }
}
