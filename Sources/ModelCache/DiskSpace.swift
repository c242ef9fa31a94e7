// DiskSpace - telling a full disk (ENOSPC, EDQUOT) from other I/O failures, and saying how
// much room a download still needs.
import Foundation

public enum DiskSpace {
    /// True for the errnos of a full disk or an exhausted quota.
    public static func isFull(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }

    /// True when `error` is a cache write that failed because the disk is full.
    public static func isFull(_ error: Error) -> Bool {
        if case CacheError.io(_, _, let code) = error { return isFull(code) }
        return false
    }

    /// Bytes an unprivileged writer may still use on the filesystem holding `path` (0 when unknown).
    public static func available(at path: String) -> Int64 {
        var st = statvfs()
        guard statvfs(path, &st) == 0 else { return 0 }
        return Int64(st.f_bavail) * Int64(st.f_frsize)
    }

    /// `error` as `CacheError.diskFull` when it is a full disk (with what is still needed and
    /// what is free), else unchanged.
    public static func explain(_ error: Error, directory: ModelDirectory, needed: Int64, staged: [String]) -> Error {
        guard isFull(error) else { return error }
        let what = staged.isEmpty ? "nothing" : staged.count == 1 ? staged[0] : "\(staged.count) files (\(staged.prefix(3).joined(separator: ", "))\(staged.count > 3 ? ", …" : ""))"
        return CacheError.diskFull(directory: directory.path, needed: needed,
                                   available: available(at: directory.path), staged: what)
    }
}
