// HubCache - a huggingface_hub cache on disk: where it is, its repo folders' names, its blob locks
// (one repo folder's layout is HubRepoFolder's).
//
// The layout huggingface_hub reads (and writes itself):
//   <hub>/models--<org>--<name>/blobs/<etag>             file contents, named by sha256 (LFS) or git blob id
//   <hub>/models--<org>--<name>/snapshots/<commit>/<path>  relative symlinks to ../../blobs/<etag>
//   <hub>/models--<org>--<name>/refs/<revision>           the commit, no newline
//   <hub>/.locks/models--<org>--<name>/<etag>.lock        flock(2) locks, left in place
// speech-fetch adds only what huggingface_hub ignores: `.incomplete/` and `.speech-fetch.json` in
// the repo folder (its scan looks at `snapshots/` and `refs/` only).
import Digest
import Foundation
import HubTypes
import SharedFiles

public enum HubCache {
    /// huggingface_hub's own order: `HF_HUB_CACHE`, `HUGGINGFACE_HUB_CACHE`, `HF_HOME/hub`,
    /// `${XDG_CACHE_HOME:-~/.cache}/huggingface/hub`.
    public static func defaultDirectory(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        func set(_ name: String) -> String? {
            guard let v = env[name], !v.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
            return expandTilde(v, env)
        }
        if let dir = set("HF_HUB_CACHE") ?? set("HUGGINGFACE_HUB_CACHE") { return URL(fileURLWithPath: dir, isDirectory: true) }
        return homeDirectory(env).appendingPathComponent("hub", isDirectory: true)
    }

    /// `HF_HOME`, else `${XDG_CACHE_HOME:-~/.cache}/huggingface`.
    public static func homeDirectory(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let home = env["HF_HOME"], !home.trimmingCharacters(in: .whitespaces).isEmpty {
            return URL(fileURLWithPath: expandTilde(home, env), isDirectory: true)
        }
        let base = env["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((env["HOME"] ?? NSHomeDirectory()) + "/.cache")
        return URL(fileURLWithPath: base, isDirectory: true).appendingPathComponent("huggingface", isDirectory: true)
    }

    private static func expandTilde(_ path: String, _ env: [String: String]) -> String {
        guard path == "~" || path.hasPrefix("~/") else { return path }
        return (env["HOME"] ?? NSHomeDirectory()) + path.dropFirst()
    }

    /// A full commit id (40 lowercase hex digits), which names a snapshot without a ref.
    public static func isCommitHash(_ s: String) -> Bool {
        ContentHasher.isHex(s, length: 40)
    }

    /// Refuses a repo folder in which a folder speech-fetch writes into (or reads pointers from)
    /// is not a plain directory: `blobs/`, `snapshots/` (and `snapshots/<commit>/`), `refs/`,
    /// `trees/`, `.incomplete/`, and `<hub>/.locks/models--<org>--<name>/`. A symbolic link
    /// planted there would lead our writes (or a look-up's trust) out of the cache. Absent folders
    /// are fine: they are made as plain directories.
    /// - Throws: `CacheError.unsafeCacheEntry` naming the entry.
    public static func checkNoPlantedLinks(hub: URL, repo: RepoID, commit: String?) throws {
        let folder = HubRepoFolder(hub: hub, repo: repo)
        var entries = [HubRepoFolder.locksRoot(hub: hub), folder.locksPath]
        entries += [folder.blobsPath, folder.snapshotsPath, folder.refsPath, folder.treesPath, folder.path + "/" + ModelLayout.staging]
        if let commit, !commit.isEmpty { entries.append(folder.snapshotPath(commit)) }
        for path in entries {
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                let what = (st.st_mode & S_IFMT) == S_IFLNK ? "it is a symbolic link, which would lead writes out of the cache"
                                                           : "it is not a directory"
                throw CacheError.unsafeCacheEntry(path: path, reason: what)
            }
        }
    }

    /// Marks `hub` as a cache directory (the Cache Directory Tagging Standard's file, which
    /// huggingface_hub writes too), so backup tools skip it. Best effort.
    public static func tag(_ hub: URL) {
        let path = hub.path + "/CACHEDIR.TAG"
        guard access(path, F_OK) != 0 else { return }
        let text = "Signature: 8a477f597d28d172789f06886806bc55\n# A huggingface_hub cache, also written by speech-fetch.\n"
        try? FileManager.default.createDirectory(at: hub, withIntermediateDirectories: true)
        try? AtomicFile.write(Data(text.utf8), to: URL(fileURLWithPath: path))
    }
}

/// huggingface_hub's per-blob lock, `<hub>/.locks/models--<org>--<name>/<etag>.lock`, taken the
/// way its filelock takes it: open (created 0664 if absent, never deleted), `flock(LOCK_EX)`,
/// and start over when the file was unlinked before the lock was granted. flock is local to a
/// machine (and absent on some network filesystems): it keeps this node's huggingface_hub and
/// speech-fetch from writing the same blob at once, while correctness rests on rename.
public final class HubBlobLock: @unchecked Sendable {
    public let path: String
    private var fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    /// Waits until the lock is ours (polling with LOCK_NB, so a stop request is noticed), or
    /// returns nil when the file cannot be opened, the filesystem has no flock, or `timeout`
    /// seconds passed.
    public static func acquire(_ path: String, timeout: Double, isCancelled: () -> Bool = { false }) -> HubBlobLock? {
        if case .locked(let lock) = attempt(path, timeout: timeout, isCancelled: isCancelled) { return lock }
        return nil
    }

    /// Waits at most `timeout` seconds for the lock; after `noticeAfter` seconds of waiting
    /// says so once through `onWaiting` (the message names the lock file), as huggingface_hub
    /// does. Nil when there is no lock to take (no flock on this filesystem, the file cannot be
    /// opened) or `isCancelled` turned true.
    /// - Throws: `CacheError.lockWaitExpired` when another process still holds it at the bound.
    public static func wait(_ path: String, timeout: Double, noticeAfter: Double = 5,
                            onWaiting: (String) -> Void = { _ in }, isCancelled: () -> Bool = { false }) throws -> HubBlobLock? {
        switch attempt(path, timeout: timeout, noticeAfter: noticeAfter, onWaiting: onWaiting, isCancelled: isCancelled) {
        case .locked(let lock): return lock
        case .unavailable: return nil
        case .timedOut:
            throw CacheError.lockWaitExpired(path: path, seconds: timeout,
                                             holder: "another process (a huggingface_hub download of the same file?)")
        }
    }

    private enum Attempt {
        case locked(HubBlobLock)
        case unavailable
        case timedOut
    }

    private static func attempt(_ path: String, timeout: Double, noticeAfter: Double = .infinity,
                                onWaiting: (String) -> Void = { _ in }, isCancelled: () -> Bool) -> Attempt {
        let started = Date()
        let deadline = started.addingTimeInterval(timeout)
        var noticed = false
        let folder = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var pause: useconds_t = 5_000
        while !isCancelled() {
            // Created group-writable whatever the umask, as huggingface_hub does, so that every
            // user of a shared cache can wait on it; an existing one is opened as it is.
            var fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o664)
            if fd >= 0 {
                fchmod(fd, 0o664)
            } else if errno == EEXIST {
                fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
                if fd < 0 && errno == ENOENT { continue }  // removed meanwhile
            }
            guard fd >= 0 else { return .unavailable }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                var st = stat()
                if fstat(fd, &st) == 0, st.st_nlink > 0 { return .locked(HubBlobLock(path: path, fd: fd)) }
                close(fd)  // unlinked while we waited: lock the file that is there now
                continue
            }
            let code = errno
            close(fd)
            guard code == EWOULDBLOCK || code == EINTR else { return .unavailable }  // ENOLCK, ENOSYS: no flock here
            let waited = Date().timeIntervalSince(started)
            if waited >= timeout || Date() >= deadline { return .timedOut }
            if !noticed && waited >= noticeAfter {
                noticed = true
                onWaiting("waiting for lock \(path) (another process holds it; giving up after \(Int(timeout.rounded())) s)")
            }
            usleep(pause)
            pause = min(pause * 2, 200_000)
        }
        return .unavailable
    }

    /// True when another open file holds the lock now (a try with `LOCK_NB`, undone at once):
    /// huggingface_hub is writing that blob. False when it is free, absent, or cannot be locked
    /// here (no flock on this filesystem).
    public static func isHeld(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// Unlocks and closes; the file stays, as huggingface_hub leaves it.
    public func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }
}
