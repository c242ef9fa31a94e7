// SpoolFS - the spool's own filesystem steps: exclusive create, publish by link, and the
// file server's clock read through the spool's probe file.
import Foundation
import ModelCache
import SharedFiles

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

    /// Runs a call of the filesystem layer, saying its failure as `SpoolError.io`.
    static func saying<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as FileError {
            throw SpoolError.io(path: error.path, operation: error.operation, errno: error.errno)
        }
    }
}

public enum SpoolFS {
    /// Writes `data` to a new private file (`O_EXCL`, `O_NOFOLLOW`, 0600), fsyncs and closes it.
    /// An empty file (a job or marker: its name is its content) is not synced: there is nothing
    /// to make durable before the link that publishes it; nor is one that is not `durable` (a
    /// record its readers can make again when a power loss leaves it unreadable: a plan).
    public static func writeNew(_ path: String, _ data: Data, durable: Bool = true) throws {
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
        if let code = data.withUnsafeBytes({ FileIO.writeAll(fd, $0) }) {
            close(fd)
            throw SpoolError.io(path: path, operation: "write", errno: code)
        }
        guard data.isEmpty || !durable || fsync(fd) == 0 else {
            let code = errno
            close(fd)
            throw SpoolError.io(path: path, operation: "sync", errno: code)
        }
        // NFS reports deferred write errors at close.
        guard close(fd) == 0 else { throw SpoolError.io(path: path, operation: "close", errno: errno) }
        ok = true
    }

    /// Creates an empty private file (`O_EXCL`, `O_NOFOLLOW`, 0600) in place: a file whose name
    /// is its content (a ready job) exists whole the moment it exists. True when this call made
    /// it, false when it was there already, nil when it could not be made.
    public static func createEmpty(_ path: String) -> Bool? {
        let fd = SharedFS.retry { open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        if fd >= 0 {
            close(fd)
            return true
        }
        // A create retried after a stale handle may find the file it made meanwhile: there either way.
        return errno == EEXIST ? false : nil
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
}
