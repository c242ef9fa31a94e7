// DiskSpace - telling a full disk (ENOSPC, EDQUOT) from other I/O failures, and how much room
// a filesystem still has.
import Foundation

public enum DiskSpace {
    /// True for the errnos of a full disk or an exhausted quota.
    public static func isFull(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }

    /// Bytes an unprivileged writer may still use on the filesystem holding `path` (0 when unknown).
    public static func available(at path: String) -> Int64 {
        var st = statvfs()
        guard statvfs(path, &st) == 0 else { return 0 }
        return Int64(st.f_bavail) * Int64(st.f_frsize)
    }

    /// `path`, or its nearest ancestor that exists (a directory not yet made).
    public static func nearestExisting(_ path: String) -> String {
        var current = path
        while !current.isEmpty, current != "/", access(current, F_OK) != 0 {
            current = (current as NSString).deletingLastPathComponent
        }
        return current.isEmpty ? "/" : current
    }
}
