// HubBlobLock - huggingface_hub's per-blob lock in a huggingface_hub cache (`<hub>/.locks/…`,
// HubCache.swift's header draws the layout), taken as huggingface_hub's filelock takes it.
import Foundation

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
