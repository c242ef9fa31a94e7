// SharedFS - reading shared state on a network filesystem: an error is "unknown, look again".
//
// On NFS or GlusterFS, an open or stat of a file that another client just renamed, replaced or
// unlinked can fail with ESTALE (or EIO) although the file is there. Such an answer says nothing
// about the file. Every read of shared state retries it by path with a short bounded backoff, and
// decides only on what was read successfully (docs/protocol.md, "Reading shared state").
import Foundation

/// What a look at a shared file or directory found.
public enum Lookup<Value> {
    /// Read successfully.
    case found(Value)
    /// Positively absent: the call answered ENOENT (or ENOTDIR).
    case absent
    /// The read failed with this errno, also after the retries: nothing is known.
    case unknown(Int32)

    public var value: Value? { if case .found(let v) = self { return v }; return nil }
    public var isAbsent: Bool { if case .absent = self { return true }; return false }
}

public enum SharedFS {
    /// Errors that say nothing about the file: a stale handle, an I/O error of the transport,
    /// an interrupted or timed-out call.
    public static func isTransient(_ code: Int32) -> Bool {
        code == ESTALE || code == EIO || code == EINTR || code == EAGAIN || code == ETIMEDOUT || code == ENOTCONN
    }

    /// Attempts of one call before its answer counts as unknown; the waits between them double
    /// from 2 ms (about a quarter of a second in all).
    public static let attempts = 8

    /// Runs a syscall-like `body` (negative on failure, errno set) again while it fails with a
    /// transient error; returns its last result with errno as it left it.
    @discardableResult
    public static func retry(_ body: () -> Int32) -> Int32 {
        var delay: UInt32 = 2_000
        for attempt in 1...attempts {
            let r = body()
            if r >= 0 { return r }
            let code = errno
            guard isTransient(code), attempt < attempts else { errno = code; return r }
            usleep(delay)
            delay = min(delay * 2, 100_000)
        }
        return -1
    }

    /// `lstat` with retries: the stat, absent, or unknown.
    public static func lstat(_ path: String) -> Lookup<stat> {
        var st = stat()
        if retry({ Glibc.lstat(path, &st) }) == 0 { return .found(st) }
        return failure(errno)
    }

    /// Opens a file for reading with retries (O_NOFOLLOW): a descriptor, absent, or unknown.
    public static func openForReading(_ path: String) -> Lookup<Int32> {
        let fd = retry { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        return fd >= 0 ? .found(fd) : failure(errno)
    }

    /// Reads a small regular file whole. A read that fails part way is retried from a fresh open
    /// by path (the old descriptor may be the stale one). Not a regular file, or larger than
    /// `limit`: unknown (EINVAL / EFBIG).
    public static func read(_ path: String, limit: Int = 16 << 20) -> Lookup<Data> {
        var last: Lookup<Data> = .unknown(EIO)
        for _ in 0..<3 {
            let fd: Int32
            switch openForReading(path) {
            case .found(let d): fd = d
            case .absent: return .absent
            case .unknown(let code): return .unknown(code)
            }
            defer { close(fd) }
            var st = stat()
            guard retry({ fstat(fd, &st) }) == 0 else { last = failure(errno); continue }
            guard (st.st_mode & S_IFMT) == S_IFREG else { return .unknown(EINVAL) }
            guard Int(st.st_size) <= limit else { return .unknown(EFBIG) }
            var data = Data(count: Int(st.st_size))
            let got = data.withUnsafeMutableBytes { FileIO.readFull(fd, into: $0) }
            if got < 0 { last = .unknown(errno); continue }
            // Shorter than its size: the file was replaced while we read; look again.
            guard got == data.count else { last = .unknown(EAGAIN); continue }
            return .found(data)
        }
        return last
    }

    /// The names in a directory (without `.`/`..`), absent, or unknown.
    public static func list(_ directory: String) -> Lookup<[String]> {
        var delay: UInt32 = 2_000
        for attempt in 1...attempts {
            guard let dir = opendir(directory) else {
                let code = errno
                if isTransient(code) && attempt < attempts { usleep(delay); delay = min(delay * 2, 100_000); continue }
                return failure(code)
            }
            var names: [String] = []
            var code: Int32 = 0
            while true {
                errno = 0
                guard let entry = readdir(dir) else { code = errno; break }
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(dir)
            if code == 0 { return .found(names) }
            if !(isTransient(code) && attempt < attempts) { return .unknown(code) }
            usleep(delay)
            delay = min(delay * 2, 100_000)
        }
        return .unknown(EIO)
    }

    /// The names in a directory, an absent one read as empty; nil when it could not be read.
    public static func names(_ directory: String) -> [String]? {
        switch list(directory) {
        case .found(let names): return names
        case .absent: return []
        case .unknown: return nil
        }
    }

    /// Does `path` exist (lstat, with retries)? nil when that is unknown.
    public static func exists(_ path: String) -> Bool? {
        switch lstat(path) {
        case .found: return true
        case .absent: return false
        case .unknown: return nil
        }
    }

    /// A file's mtime in seconds, absent, or unknown.
    public static func mtime(_ path: String) -> Lookup<Double> {
        switch lstat(path) {
        case .found(let st): return .found(Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
        case .absent: return .absent
        case .unknown(let code): return .unknown(code)
        }
    }

    /// Sets a file's mtime to the file server's "now" (`utimensat(NULL)`), with retries.
    @discardableResult
    public static func touch(_ path: String) -> Bool {
        retry { utimensat(AT_FDCWD, path, nil, AT_SYMLINK_NOFOLLOW) } == 0
    }

    /// "Now" on the filesystem's clock: touch `probe` (a file or directory that exists) and read
    /// its mtime back. Nil when either failed: a lease must then not be judged at all.
    public static func serverNow(probe: String) -> Double? {
        guard touch(probe) else { return nil }
        return mtime(probe).value
    }

    private static func failure<T>(_ code: Int32) -> Lookup<T> {
        code == ENOENT || code == ENOTDIR ? .absent : .unknown(code)
    }
}
