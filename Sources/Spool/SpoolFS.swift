// SpoolFS - the filesystem primitives the spool is built on: exclusive create, publish by
// link or rename, lease touches, and the file server's clock.
import Foundation
import ModelCache

/// Errors of the spool layer.
public enum SpoolError: Error, Sendable, CustomStringConvertible {
    case io(path: String, operation: String, errno: Int32)
    case corrupt(path: String, reason: String)

    public var description: String {
        switch self {
        case .io(let path, let operation, let code):
            return "spool: cannot \(operation) \(path): \(String(cString: strerror(code)))"
        case .corrupt(let path, let reason):
            return "spool: \(path) is unusable (\(reason)); it can be deleted"
        }
    }
}

public enum SpoolFS {
    /// Creates a directory (and parents) readable by the owner only.
    public static func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o700) == 0 || errno == EEXIST { return }
        if errno == ENOENT {
            try makeDirectory((path as NSString).deletingLastPathComponent)
            if mkdir(path, 0o700) == 0 || errno == EEXIST { return }
        }
        throw SpoolError.io(path: path, operation: "create directory", errno: errno)
    }

    /// Writes `data` to a new private file (`O_EXCL`, `O_NOFOLLOW`, 0600), fsyncs and closes it.
    /// An empty file (a job or marker: its name is its content) is not synced: there is nothing
    /// to make durable before the link that publishes it.
    public static func writeNew(_ path: String, _ data: Data) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SpoolError.io(path: path, operation: "create", errno: errno) }
        var ok = false
        defer { if !ok { unlink(path) } }
        try data.withUnsafeBytes { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    let code = errno
                    close(fd)
                    throw SpoolError.io(path: path, operation: "write", errno: code)
                }
                off += n
            }
        }
        guard data.isEmpty || fsync(fd) == 0 else {
            let code = errno
            close(fd)
            throw SpoolError.io(path: path, operation: "sync", errno: code)
        }
        // NFS reports deferred write errors at close.
        guard close(fd) == 0 else { throw SpoolError.io(path: path, operation: "close", errno: errno) }
        ok = true
    }

    /// Flushes a finished file to disk (fsync) and checks the close, before it is published.
    public static func syncFile(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw SpoolError.io(path: path, operation: "open", errno: errno) }
        guard fsync(fd) == 0 else {
            let code = errno
            close(fd)
            throw SpoolError.io(path: path, operation: "sync", errno: code)
        }
        guard close(fd) == 0 else { throw SpoolError.io(path: path, operation: "close", errno: errno) }
    }

    /// Publishes a finished temp file under `target` with link(2): false when `target` already
    /// exists (someone published it first). The temp file is removed either way.
    @discardableResult
    public static func publishOnce(_ temp: String, as target: String) throws -> Bool {
        defer { unlink(temp) }
        if link(temp, target) == 0 { return true }
        if errno == EEXIST { return false }
        throw SpoolError.io(path: target, operation: "publish", errno: errno)
    }

    /// Reads a small spool file without following symlinks; nil when it is absent or not a regular file.
    public static func read(_ path: String, limit: Int = 16 << 20) -> Data? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int(st.st_size) <= limit else { return nil }
        var data = Data(count: Int(st.st_size))
        let n = data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        return n == data.count ? data : nil
    }

    /// Names in a directory (regular files and anything else), without `.`/`..`; empty when absent.
    public static func list(_ directory: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    }

    /// Sets a file's mtime to the file server's "now" (a lease refresh).
    @discardableResult
    public static func touch(_ path: String) -> Bool { utimensat(AT_FDCWD, path, nil, AT_SYMLINK_NOFOLLOW) == 0 }

    /// A file's mtime in seconds, or nil.
    public static func mtime(_ path: String) -> Double? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
    }

    /// "Now" on the filesystem's clock: touch a probe file and read its mtime back. On NFS this is
    /// the server's clock, the one every node's lease touches are stamped with.
    public static func serverNow(probe: String) -> Double {
        let fd = open(probe, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
        touch(probe)
        return mtime(probe) ?? Date().timeIntervalSince1970
    }

    /// True when `pid` is a live process on this machine.
    public static func processAlive(_ pid: Int32) -> Bool { LockOwner.isAlive(pid) }

    /// Alive and not a zombie: a killed process whose parent has not reaped it yet writes
    /// nothing more, so what it left may be taken over.
    public static func processRunning(_ pid: Int32) -> Bool {
        guard processAlive(pid) else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return true }
        let state = stat[stat.index(after: close)...].drop { $0 == " " }.first
        return state != "Z" && state != "X"
    }
}
