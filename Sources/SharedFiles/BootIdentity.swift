// BootIdentity - which boot of this machine is running: its id (a record written in another
// boot cannot vouch for unsynced bytes) and when it started (a file older than that was left by
// a process of an earlier boot).
import Foundation

public enum BootIdentity {
    /// This boot's id (`/proc/sys/kernel/random/boot_id`); nil when unknown.
    public static let id: String? = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return nil }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty ? nil : id
    }()

    /// When this machine booted (seconds since 1970, `btime` of /proc/stat); 0 when unknown.
    public static let startTime: Double = {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
              let value = Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) else { return 0 }
        return value
    }()
}
