// HeldFile - a spool file that one process looks at or touches often, through a descriptor it
// keeps open: an fstat or futimens on a descriptor needs no lookup of each component of the path
// at the file server (a network filesystem's client looks a path up again once its entry cache
// expires, about every second). The generation file and a supervisor's heartbeat record are held
// this way; the holder re-opens by path now and then (`reopen`), and at once when the descriptor
// fails, so a file that was replaced is followed.
import Foundation
import ModelCache
import SharedFiles

final class HeldFile: @unchecked Sendable {
    let path: String
    private let lock = NSLock()
    private var fd: Int32 = -1

    init(path: String) { self.path = path }

    deinit { if fd >= 0 { close(fd) } }

    /// The file's status through the held descriptor (opened by path when needed); nil when it
    /// cannot be opened or read.
    func status() -> stat? {
        lock.withLock {
            for _ in 0..<2 {
                guard openIfNeeded() else { return nil }
                var st = stat()
                if fstat(fd, &st) == 0 { return st }
                dropLocked()  // a stale handle: look the path up again
            }
            return nil
        }
    }

    /// Sets the file's times to the file server's "now" (`futimens(fd, NULL)`); false when it
    /// could not be opened or touched.
    func touch() -> Bool {
        lock.withLock {
            for _ in 0..<2 {
                guard openIfNeeded() else { return false }
                if futimens(fd, nil) == 0 { return true }
                dropLocked()
            }
            return false
        }
    }

    /// True while the path still names the held file (false also when it is gone or was never
    /// opened); nil when that cannot be read. Closes a descriptor that no longer matches, so the
    /// next call opens the path afresh.
    func stillNamesHeldFile() -> Bool? {
        lock.withLock {
            guard fd >= 0 else { return false }
            var held = stat()
            guard fstat(fd, &held) == 0 else {
                dropLocked()
                return false
            }
            switch SharedFS.lstat(path) {
            case .found(let st):
                if st.st_ino == held.st_ino && st.st_dev == held.st_dev { return true }
                dropLocked()
                return false
            case .absent:
                dropLocked()
                return false
            case .unknown:
                return nil
            }
        }
    }

    private func openIfNeeded() -> Bool {
        if fd >= 0 { return true }
        fd = SharedFS.retry { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        return fd >= 0
    }

    private func dropLocked() {
        if fd >= 0 { close(fd) }
        fd = -1
    }
}
