// AtomicFile - small files published whole: write a temp file, fsync, close, rename.
import Foundation

public enum AtomicFile {
    /// What a temp file's name carries between the target's name and its writer's pid.
    public static let tempMarker = ".tmp."

    /// `.<name>.tmp.<pid>.<n>` beside the target: a temp file `write` may leave after a crash.
    public static func tempName(of name: String, pid: Int32, n: UInt32) -> String { ".\(name)\(tempMarker)\(pid).\(n)" }

    /// Writes `data` to `url` so readers see either the old file or the new one, never a mix.
    /// Throws `FileError` naming the step that failed.
    public static func write(_ data: Data, to url: URL, mode: mode_t = 0o644) throws {
        var tmp = url
        // A fresh name on every attempt: a create that failed with a stale handle may still
        // have made its file.
        let fd = SharedFS.retry {
            tmp = url.deletingLastPathComponent()
                .appendingPathComponent(tempName(of: url.lastPathComponent, pid: getpid(), n: UInt32.random(in: 0...UInt32.max)))
            return open(tmp.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        }
        guard fd >= 0 else { throw FileError(path: tmp.path, operation: "create", errno: errno) }
        var ok = false
        defer { if !ok { unlink(tmp.path) } }
        let failed = data.withUnsafeBytes { FileIO.writeAll(fd, $0) } ?? (fsync(fd) == 0 ? nil : errno)
        if let failed {
            close(fd)
            throw FileError(path: tmp.path, operation: "write", errno: failed)
        }
        guard close(fd) == 0 else { throw FileError(path: tmp.path, operation: "close", errno: errno) }
        guard rename(tmp.path, url.path) == 0 else { throw FileError(path: url.path, operation: "rename into", errno: errno) }
        ok = true
    }
}
