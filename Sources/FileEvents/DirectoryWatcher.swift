// DirectoryWatcher - sleeps until something changes in a few directories (inotify through
// libinotifytools), or a timeout passes. libinotifytools keeps global state, so there is one
// watcher per process.
import CInotify
import Foundation

public final class DirectoryWatcher: @unchecked Sendable {
    /// The process's watcher; nil when inotify cannot be initialised (the per-user limit of
    /// instances is used up) or `SPEECH_FETCH_INOTIFY=0` turns it off: then callers sleep on
    /// the spool's wake word or poll.
    public static let shared: DirectoryWatcher? =
        ProcessInfo.processInfo.environment["SPEECH_FETCH_INOTIFY"] == "0" ? nil : DirectoryWatcher()

    private let lock = NSLock()
    private var watched = Set<String>()

    private init?() {
        guard inotifytools_initialize() != 0 else { return nil }
    }

    /// Watches `directory` for files created, moved in, written or deleted. Idempotent.
    @discardableResult
    public func watch(_ directory: String) -> Bool {
        lock.withLock {
            if watched.contains(directory) { return true }
            let events = Int32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB)
            guard inotifytools_watch_file(directory, events) != 0 else { return false }
            watched.insert(directory)
            return true
        }
    }

    /// Blocks until an event arrives in a watched directory (true) or `seconds` pass (false).
    /// Costs no CPU while it waits. Events are not drained: callers re-scan on every wake, so a
    /// queued event only causes one more cheap scan. (libinotifytools treats a timeout of 0 as
    /// "block", so there is no non-blocking drain.)
    public func wait(seconds: Int) -> Bool {
        inotifytools_next_event(max(1, seconds)) != nil
    }
}

/// Which filesystems report other machines' writes through inotify, and which are local disks.
public enum FilesystemKind {
    /// False for network and FUSE filesystems (NFS, SMB/CIFS, FUSE, Ceph, Lustre, GPFS, 9p…),
    /// where inotify sees only this machine's writes and a bounded poll is needed.
    public static func inotifySeesAllWriters(_ path: String) -> Bool {
        var st = statfs()
        guard statfs(path, &st) == 0 else { return false }
        return !isRemote(st)
    }

    /// True when the open file lives on a network or FUSE filesystem (or its kind cannot be read):
    /// there a copy through this process's memory beats copying in the kernel and reading back.
    public static func isRemote(fileDescriptor fd: Int32) -> Bool {
        var st = statfs()
        guard fstatfs(fd, &st) == 0 else { return true }
        return isRemote(st)
    }

    private static func isRemote(_ st: statfs) -> Bool {
        let remote: Set<Int> = [0x6969, 0x65735546, 0xFF534D42, 0xFE534D42, 0x517B, 0x00C36400, 0x0BD00BD0,
                                0x47504653, 0x01021997, 0x013111A8, 0x73757245]
        return remote.contains(Int(UInt32(truncatingIfNeeded: Int(st.f_type))))
    }
}
