// HeldFolders - folders a process works in all the time, held open by descriptor, so that a call
// on a file directly inside one is made relative to it (`openat`, `fstatat`, `renameat`, …) and
// the path's folders are not looked up again. A network filesystem's client looks every
// component of a path up again at the file server once its entry cache expires (about a second
// on GlusterFS's FUSE client and NFS): a busy node that walks `<base>/spool/jobs/claimed/…` pays
// a LOOKUP per folder per second; through a held `jobs/claimed` it pays one for the file's name
// only (docs/protocol.md, "Held folders").
//
// A held folder that was removed (and perhaps made again) is noticed and opened again by path
// once per call: when a call answers ENOENT, ESTALE or ENOTDIR, or a listing finds nothing, the
// held descriptor is looked at (`fstat`: a stale handle, or a folder with no link left, is gone).
// Reads keep `SharedFS`'s rule: transient errors are retried, an answer that still fails is
// unknown.
import CFileOps
import Foundation

public final class HeldFolders: @unchecked Sendable {
    private let lock = NSLock()
    /// Each held folder's descriptor (`O_PATH`), -1 until its first use.
    private var descriptors: [String: Int32]
    /// Descriptors of folders opened again: closed only at deinit, because another thread may be
    /// in a call with one (closing it could hand its number to an unrelated file meanwhile).
    private var retired: [Int32] = []
    /// Whether the folders are on a network or FUSE filesystem (`FilesystemKind`, looked at when
    /// the first is opened), and when each was last seen alive (`MonotonicClock` nanoseconds).
    private var remote: Bool?
    private var seenAlive: [String: UInt64] = [:]

    /// How long a held folder on a network or FUSE filesystem seen alive is taken as alive without
    /// another look: that client answers a folder's `fstat` from the file server whenever it
    /// changed the folder itself (it drops its cached attributes then), which a busy spool folder
    /// always is. At 1 s the looks of a node's six processes were still 8 STATs per range in the
    /// herd at N = 10 (docs/lab/scale.md); a spool's folders are removed only by a reset, which
    /// is noticed this much later.
    public static let recheckSeconds = 5.0

    /// No folder held: every call by path.
    public static let none = HeldFolders([])

    /// Holds `folders` (paths as the caller spells them; a path is matched by its parent's exact
    /// spelling). Each is opened at its first use.
    public init(_ folders: [String]) {
        descriptors = Dictionary(folders.map { ($0, Int32(-1)) }, uniquingKeysWith: { a, _ in a })
    }

    deinit {
        for fd in descriptors.values where fd >= 0 { close(fd) }
        for fd in retired { close(fd) }
    }

    // MARK: Calls on a path

    /// `lstat` of `path`, with `SharedFS`'s retries: the stat, absent, or unknown.
    public func lstat(_ path: String) -> Lookup<stat> {
        var st = stat()
        if at(path, { fstatat($0, $1, &st, AT_SYMLINK_NOFOLLOW) }) == 0 { return .found(st) }
        return HeldFolders.failure(errno)
    }

    /// Does `path` exist? nil when that is unknown.
    public func exists(_ path: String) -> Bool? {
        switch lstat(path) {
        case .found: return true
        case .absent: return false
        case .unknown: return nil
        }
    }

    /// `path`'s mtime in seconds, absent, or unknown.
    public func mtime(_ path: String) -> Lookup<Double> {
        switch lstat(path) {
        case .found(let st): return .found(Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
        case .absent: return .absent
        case .unknown(let code): return .unknown(code)
        }
    }

    /// Sets `path`'s times to the file server's "now" (no link followed), with retries.
    @discardableResult
    public func touch(_ path: String) -> Bool {
        at(path, { utimensat($0, $1, nil, AT_SYMLINK_NOFOLLOW) }) == 0
    }

    /// "Now" on the filesystem's clock, as `SharedFS.serverNow`: `probe` touched and its mtime
    /// read back; nil when either failed.
    public func serverNow(probe: String) -> Double? {
        guard touch(probe) else { return nil }
        return mtime(probe).value
    }

    /// `open(path, flags, mode)`, with retries of transient errors: the descriptor, or -1 with
    /// errno set. `O_CLOEXEC` is added.
    public func open(_ path: String, _ flags: Int32, mode: mode_t = 0) -> Int32 {
        at(path, { openat($0, $1, flags | O_CLOEXEC, mode) })
    }

    /// Opens `path` for reading (no link followed): a descriptor, absent, or unknown.
    public func openForReading(_ path: String) -> Lookup<Int32> {
        let fd = open(path, O_RDONLY | O_NOFOLLOW)
        return fd >= 0 ? .found(fd) : HeldFolders.failure(errno)
    }

    /// Reads a small regular file whole, as `SharedFS.read` does, its open relative to a held folder.
    public func read(_ path: String, limit: Int = 16 << 20) -> Lookup<Data> {
        SharedFS.read(path, limit: limit, opening: openForReading)
    }

    /// `unlink(path)`: 0, or -1 with errno set. Not retried: an unlink retried after a stale
    /// handle may find the name it removed gone (ENOENT), which callers read as "was not there".
    @discardableResult
    public func unlink(_ path: String) -> Int32 {
        at(path, retrying: false, { unlinkat($0, $1, 0) })
    }

    /// `rename(from, to)`: 0, or -1 with errno set (not retried, as `unlink`).
    @discardableResult
    public func rename(_ from: String, _ to: String) -> Int32 {
        at(from, retrying: false) { fromFD, fromName in
            at(to, retrying: false) { toFD, toName in renameat(fromFD, fromName, toFD, toName) }
        }
    }

    /// `link(from, to)`: 0, or -1 with errno set (EEXIST: `to` is there; not retried).
    @discardableResult
    public func link(_ from: String, _ to: String) -> Int32 {
        at(from, retrying: false) { fromFD, fromName in
            at(to, retrying: false) { toFD, toName in linkat(fromFD, fromName, toFD, toName, 0) }
        }
    }

    /// The names in `folder` (without `.`/`..`), absent, or unknown. A held folder is listed
    /// through a descriptor opened relative to it; a listing that finds nothing looks at the held
    /// descriptor, as a removed folder lists empty.
    public func list(_ folder: String) -> Lookup<[String]> {
        guard lock.withLock({ descriptors[folder] }) != nil else { return SharedFS.list(folder) }
        for attempt in 0..<2 {
            let held = descriptor(of: folder)
            guard held >= 0 else { return HeldFolders.failure(errno) }
            let answer = SharedFS.list(opening: { openat(held, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) })
            switch answer {
            case .found(let names) where !names.isEmpty: return answer
            case .unknown(let code) where !HeldFolders.mayBeGone(code): return answer
            default:
                guard attempt == 0, isGone(folder, held) else { return answer }
                reopen(folder, replacing: held)
            }
        }
        return .unknown(EIO)
    }

    /// The names in `folder`, an absent one read as empty; nil when it could not be read.
    public func names(_ folder: String) -> [String]? {
        switch list(folder) {
        case .found(let names): return names
        case .absent: return []
        case .unknown: return nil
        }
    }

    // MARK: The held descriptors

    /// Runs `body(dirfd, name)` for `path`: relative to its parent's descriptor when the parent is
    /// held, else `(AT_FDCWD, path)`. Transient errors are retried (`SharedFS.retry`) when
    /// `retrying`; a failure that a removed folder gives (ENOENT, ESTALE, ENOTDIR) looks at the
    /// held descriptor, and when the folder is gone opens it again by path and calls once more.
    public func at(_ path: String, retrying: Bool = true, _ body: (Int32, String) -> Int32) -> Int32 {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[..<$0]) } ?? ""
        guard let slash, lock.withLock({ descriptors[folder] }) != nil else {
            return retrying ? SharedFS.retry { body(AT_FDCWD, path) } : body(AT_FDCWD, path)
        }
        let name = String(path[path.index(after: slash)...])
        var reopened = false
        func once() -> Int32 {
            let held = descriptor(of: folder)
            guard held >= 0 else { return -1 }
            let r = body(held, name)
            guard r < 0, !reopened else { return r }
            let code = errno
            guard HeldFolders.mayBeGone(code), isGone(folder, held) else { errno = code; return r }
            reopened = true
            reopen(folder, replacing: held)
            let again = descriptor(of: folder)
            return again >= 0 ? body(again, name) : -1
        }
        return retrying ? SharedFS.retry(once) : once()
    }

    /// The held descriptor of `folder`, opened by path at its first use; -1 with errno set when
    /// it cannot be opened now.
    private func descriptor(of folder: String) -> Int32 {
        lock.withLock {
            if let fd = descriptors[folder], fd >= 0 { return fd }
            let fd = Glibc.open(folder, sf_o_path() | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { return fd }
            descriptors[folder] = fd
            // One statfs for all the folders (a spool is on one filesystem): a network client
            // sends each to its file server.
            if remote == nil { remote = FilesystemKind.isRemote(fileDescriptor: fd) }
            seenAlive[folder] = MonotonicClock.nanoseconds()
            return fd
        }
    }

    /// Forgets `held` as `folder`'s descriptor (unless another thread replaced it already): the
    /// next call opens the folder by path.
    private func reopen(_ folder: String, replacing held: Int32) {
        lock.withLock {
            guard descriptors[folder] == held else { return }
            descriptors[folder] = -1
            retired.append(held)
        }
    }

    /// Errors a call relative to a removed folder answers.
    private static func mayBeGone(_ code: Int32) -> Bool { code == ENOENT || code == ESTALE || code == ENOTDIR }

    /// True when the folder behind `held` is gone: its status cannot be read, or it has no link
    /// left (removed; a folder made again under its path is another inode). On a network or FUSE
    /// filesystem, not looked at again within `recheckSeconds` of the last look that found it.
    private func isGone(_ folder: String, _ held: Int32) -> Bool {
        let now = MonotonicClock.nanoseconds()
        let trusted = lock.withLock {
            remote == true && seenAlive[folder].map { now &- $0 < UInt64(HeldFolders.recheckSeconds * 1e9) } == true
        }
        if trusted { return false }
        var st = stat()
        guard fstat(held, &st) == 0, st.st_nlink > 0 else { return true }
        lock.withLock { seenAlive[folder] = now }
        return false
    }

    private static func failure<T>(_ code: Int32) -> Lookup<T> {
        code == ENOENT || code == ENOTDIR ? .absent : .unknown(code)
    }
}
