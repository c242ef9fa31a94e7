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
        // The name is this process's own (tmp/…@node@pid@n): a create retried after a stale
        // handle that had made the file meanwhile finds it (EEXIST) and truncates it.
        var retried = false
        let fd = SharedFS.retry {
            let flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (retried ? O_TRUNC : O_EXCL)
            retried = true
            return open(path, flags, 0o600)
        }
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
        let fd = SharedFS.retry { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
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

    /// Reads a small spool file without following symlinks (retrying stale handles); nil when it
    /// is absent, unreadable or not a regular file. Decisions that must tell "absent" from
    /// "could not be read" use `look`.
    public static func read(_ path: String, limit: Int = 16 << 20) -> Data? { look(path, limit: limit).value }

    /// Reads a small spool file: its bytes, positively absent, or unknown (docs/protocol.md,
    /// "Reading shared state").
    public static func look(_ path: String, limit: Int = 16 << 20) -> Lookup<Data> { SharedFS.read(path, limit: limit) }

    /// Names in a directory (regular files and anything else), without `.`/`..`; empty when
    /// absent or unreadable. Decisions that need "nothing there" for sure use `listing`.
    public static func list(_ directory: String) -> [String] { listing(directory) ?? [] }

    /// Names in a directory; nil when it could not be read (after retries).
    public static func listing(_ directory: String) -> [String]? {
        switch SharedFS.list(directory) {
        case .found(let names): return names
        case .absent: return []
        case .unknown: return nil
        }
    }

    /// Does the path exist? nil when that could not be read.
    public static func exists(_ path: String) -> Bool? { SharedFS.exists(path) }

    /// Sets a file's mtime to the file server's "now" (a lease refresh).
    @discardableResult
    public static func touch(_ path: String) -> Bool { SharedFS.touch(path) }

    /// A file's mtime in seconds, or nil (absent or unreadable).
    public static func mtime(_ path: String) -> Double? { SharedFS.mtime(path).value }

    /// "Now" on the filesystem's clock: touch a probe file and read its mtime back. On NFS this is
    /// the server's clock, the one every node's lease touches are stamped with. Nil when the
    /// probe cannot be touched or read: no lease may then be judged.
    public static func serverNow(probe: String) -> Double? {
        if SharedFS.exists(probe) == false {
            let fd = open(probe, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 { close(fd) }
        }
        return SharedFS.serverNow(probe: probe)
    }

    /// True when `pid` runs on this machine and is not a zombie: a killed process whose parent
    /// has not reaped it yet writes nothing more, so what it left may be taken over
    /// (`LeaseJudge.processRunning`, the one local-process check).
    public static func processRunning(_ pid: Int32) -> Bool { LeaseJudge.processRunning(pid) }
}
