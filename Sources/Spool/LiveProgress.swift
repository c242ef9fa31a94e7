// LiveProgress - the bytes of the ranges this node's workers have in flight, where only this
// machine looks: one empty file per range on /dev/shm, whose size is the bytes the range holds.
//
// A waiter (and `speech status`) adds these to the ranges its spool look already counts (done
// in the sidecar, or published as parts), so a daemon-served download's progress moves as bytes
// arrive instead of a whole range at a time. Nothing of it is on the shared filesystem: a worker
// creates, resizes (ftruncate, at most every 0.2 s) and removes its range's file in RAM, and a
// reader lists one tmpfs directory, so it costs the file server no operation, idle or busy.
// Ranges other nodes fetch are counted when their parts are published.
import Foundation
import Synchronization

/// The node-local record of in-flight range bytes of one spool.
public struct LiveProgress: Sendable {
    /// `/dev/shm/speech-fetch-<uid>-<device>-<inode of the spool>`: one name for every process
    /// of this machine that opens the spool, whatever path it was given.
    public let directory: String

    /// The record of `spool`, or nil where there is no writable /dev/shm.
    public init?(spool: Spool) {
        var shm = stat()
        var root = stat()
        guard stat("/dev/shm", &shm) == 0, (shm.st_mode & S_IFMT) == S_IFDIR, access("/dev/shm", W_OK) == 0,
              stat(spool.root, &root) == 0 else { return nil }
        directory = "/dev/shm/speech-fetch-\(getuid())-\(root.st_dev)-\(root.st_ino)"
    }

    /// Starts the record of one range a worker of this process fetches (`job`: `<key>.<index>`);
    /// nil when it cannot be made (progress then moves per range, as without it).
    public func begin(job: String) -> Entry? {
        guard LiveProgress.prepare(directory) else { return nil }
        let path = "\(directory)/\(job)@\(getpid())"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        return Entry(fd: fd, path: path)
    }

    /// Makes the record folder when missing; false unless it is a folder of this account's
    /// (another account could otherwise plant what this machine's processes read).
    static func prepare(_ directory: String) -> Bool {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST { return false }
        var info = stat()
        return lstat(directory, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == getuid()
    }

    /// Bytes per job of the ranges in flight on this node. Records of processes that are gone
    /// (a killed worker) are removed, not counted.
    public func read() -> [String: Int64] {
        guard let dir = opendir(directory) else { return [:] }
        defer { closedir(dir) }
        var result: [String: Int64] = [:]
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let at = name.lastIndex(of: "@"), let pid = Int32(name[name.index(after: at)...]),
                  PlannedFile.parseJob(String(name[..<at])) != nil else { continue }
            let path = "\(directory)/\(name)"
            guard kill(pid, 0) == 0 || errno == EPERM else {
                unlink(path)
                continue
            }
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            let job = String(name[..<at])
            result[job] = max(result[job] ?? 0, Int64(info.st_size))
        }
        return result
    }

    /// One range's record: its size follows the bytes the range holds.
    public final class Entry: Sendable {
        private let fd: Int32
        private let path: String
        private let state = Mutex<(bytes: Int64, at: Double, removed: Bool)>((0, 0, false))

        init(fd: Int32, path: String) {
            self.fd = fd
            self.path = path
        }

        /// The range holds `bytes` now; written at most every 0.2 s (and always the first time).
        public func update(_ bytes: Int64) {
            let now = Date().timeIntervalSinceReferenceDate
            let due = state.withLock { s -> Bool in
                guard !s.removed, bytes != s.bytes, now - s.at >= 0.2 || s.at == 0 else { return false }
                s = (bytes, now, false)
                return true
            }
            if due { _ = ftruncate(fd, off_t(bytes)) }
        }

        /// The range is published or given up: the record goes (once).
        public func remove() {
            let first = state.withLock { s -> Bool in
                defer { s.removed = true }
                return !s.removed
            }
            guard first else { return }
            unlink(path)
            close(fd)
        }

        deinit { remove() }
    }
}
