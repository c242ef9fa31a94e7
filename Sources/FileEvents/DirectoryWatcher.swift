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
    /// The watched directories by inotify watch descriptor, to tell where events came from.
    private var byDescriptor: [Int32: String] = [:]
    /// Where the events drained since the last `takeChanged` came from; nil when that cannot be
    /// told (the queue overflowed, an unknown watch, or events consumed by libinotifytools).
    private var changed: Set<String>? = []
    /// The inotify instance libinotifytools opened (it offers no getter: the one descriptor of
    /// the process that appeared with `inotifytools_initialize`); nil when it cannot be told, and
    /// then `wait` sleeps in libinotifytools, one queued event per wake.
    private let descriptor: Int32?

    private init?() {
        let before = DirectoryWatcher.inotifyDescriptors()
        guard inotifytools_initialize() != 0 else { return nil }
        let opened = DirectoryWatcher.inotifyDescriptors().subtracting(before)
        if opened.count == 1, let fd = opened.first, fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0 {
            descriptor = fd
        } else {
            descriptor = nil
        }
    }

    /// The descriptors of this process that are inotify instances (`/proc/self/fd`).
    private static func inotifyDescriptors() -> Set<Int32> {
        var found = Set<Int32>()
        guard let dir = opendir("/proc/self/fd") else { return found }
        defer { closedir(dir) }
        var target = [CChar](repeating: 0, count: 64)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let fd = Int32(name) else { continue }
            let n = readlink("/proc/self/fd/\(name)", &target, target.count - 1)
            guard n > 0 else { continue }
            if String(decoding: target[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) == "anon_inode:inotify" { found.insert(fd) }
        }
        return found
    }

    /// Watches `directory` for files created, moved in, written or deleted. Idempotent.
    @discardableResult
    public func watch(_ directory: String, arrivalsOnly: Bool = false) -> Bool {
        lock.withLock {
            if watched.contains(directory) { return true }
            // Arrivals only: a name created or moved in (a new job, part or request), not one
            // touched, written, moved out or removed (a claim taking a job, a splicer dropping a
            // part), which would wake a caller for nothing it acts on.
            let events = arrivalsOnly ? Int32(IN_CREATE | IN_MOVED_TO)
                : Int32(IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB)
            guard inotifytools_watch_file(directory, events) != 0 else { return false }
            watched.insert(directory)
            // libinotifytools keeps a directory's name with a trailing slash.
            var wd = inotifytools_wd_from_filename(directory)
            if wd < 0 { wd = inotifytools_wd_from_filename(directory + "/") }
            if wd >= 0 { byDescriptor[wd] = directory }
            return true
        }
    }

    /// Blocks until an event arrives in a watched directory (true) or `seconds` pass (false).
    /// Costs no CPU while it waits. A wake consumes every event queued until then: the caller
    /// scans after the wake, so it sees what they announced, and one burst of changes (a
    /// range's claim, refresh, part and unlinks) costs one scan, not one per event. Events that
    /// arrive during the scan wake the next `wait` at once. A signal (Ctrl-C) ends the wait
    /// early (false). Several threads may wait at once: each wakes on the events it sees
    /// queued; one of them drains them.
    public func wait(seconds: Double) -> Bool {
        guard let fd = descriptor else {
            // libinotifytools treats a timeout of 0 as "block": at least a second, and one queued
            // event per wake.
            let woke = inotifytools_next_event(max(1, Int(seconds.rounded(.up)))) != nil
            if woke { lock.withLock { changed = nil } }
            return woke
        }
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(max(0, min(seconds, 86_400)) * 1000)
        guard poll(&ready, 1, milliseconds) > 0 else { return false }
        // POLLERR or POLLNVAL alone would make every wait return at once: a spinning caller.
        guard ready.revents & Int16(POLLIN) != 0 else {
            usleep(UInt32(min(seconds, 1) * 1_000_000))
            return false
        }
        drainLock.withLock { drain(fd) }
        return true
    }

    public func wait(seconds: Int) -> Bool { wait(seconds: Double(seconds)) }

    private let drainLock = NSLock()
    private var buffer = [UInt8](repeating: 0, count: 64 << 10)

    /// Reads and drops the queued events. The descriptor is non-blocking (set at start), so a
    /// thread that finds another one drained them first does not sleep in `read`; at most 64
    /// reads, so a steady stream of events cannot hold a waiter here. libinotifytools never
    /// reads the descriptor: `inotifytools_next_event` is not called once it is known.
    private func drain(_ fd: Int32) {
        for _ in 0..<64 {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            note(buffer.prefix(count))
        }
    }

    /// Records which watched directories the events in `bytes` (whole `inotify_event` records:
    /// wd, mask, cookie, len, then len bytes of name) came from.
    private func note(_ bytes: ArraySlice<UInt8>) {
        var directories = Set<String>()
        var known = true
        var offset = bytes.startIndex
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= bytes.endIndex {
            let (wd, length) = bytes.withUnsafeBytes { raw in
                (raw.loadUnaligned(fromByteOffset: offset - bytes.startIndex, as: Int32.self),
                 raw.loadUnaligned(fromByteOffset: offset - bytes.startIndex + 12, as: UInt32.self))
            }
            offset += header + Int(length)
            if let directory = lock.withLock({ byDescriptor[wd] }) { directories.insert(directory) } else { known = false }
        }
        lock.withLock {
            if known, let seen = changed { changed = seen.union(directories) } else { changed = nil }
        }
    }

    /// The watched directories where something arrived since the last call (then forgotten);
    /// nil when that cannot be told (treat it as "anything may have changed").
    public func takeChanged() -> Set<String>? {
        lock.withLock {
            defer { changed = [] }
            return changed
        }
    }
}
