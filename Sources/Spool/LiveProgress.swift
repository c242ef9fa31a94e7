// LiveProgress - the bytes of the ranges this node's workers have in flight, where only this
// machine looks: one empty file per range on /dev/shm, whose size is the bytes the range holds.
//
// A waiter (and `speech status`) adds these to the ranges its spool look already counts (done
// in the sidecar, or published as parts), so a daemon-served download's progress moves as bytes
// arrive instead of a whole range at a time. Nothing of it is on the shared filesystem: a worker
// creates, resizes (ftruncate, at most every 0.2 s) and removes its range's file in RAM, and a
// reader lists one tmpfs directory, so it costs the file server no operation, idle or busy.
// A published range's file stays, sized to the whole range, for `landedSeconds` (a range given
// up goes at once): a waiter counts this node's ranges whole until its next look at the shared
// layer, and needs no look each time one of them lands. Ranges other nodes fetch are counted
// when their parts are published.
//
// A folder outlives its spool when nothing drains it (a daemon killed with SIGKILL, a test's
// spool deleted with its cache base): the process that makes a folder writes the spool's path
// into it (`.spool`), and removes this account's folders whose `.spool` names a path that is no
// longer that spool (gone, or another inode) and that hold no record of a live process. A folder
// without `.spool` (made before it was written) is left alone: nothing else tells its spool.
import Foundation
import SharedFiles
import Synchronization

/// The node-local record of in-flight range bytes of one spool.
public struct LiveProgress: Sendable {
    /// `/dev/shm/speech-fetch-<uid>-<device>-<inode of the spool>`: one name for every process
    /// of this machine that opens the spool, whatever path it was given.
    public let directory: String
    /// The spool's root (absolute), written into `.spool` by the process that makes the folder.
    let spoolRoot: String

    /// The record of `spool`, or nil where there is no writable /dev/shm.
    public init?(spool: Spool) {
        self.init(spoolRoot: spool.root, in: "/dev/shm")
    }

    /// The record of the spool at `spoolRoot` in `parent` (/dev/shm; a test's folder).
    init?(spoolRoot: String, in parent: String) {
        var shm = stat()
        var root = stat()
        guard stat(parent, &shm) == 0, (shm.st_mode & S_IFMT) == S_IFDIR, access(parent, W_OK) == 0,
              stat(spoolRoot, &root) == 0 else { return nil }
        directory = "\(parent)/\(LiveProgress.namePrefix)\(root.st_dev)-\(root.st_ino)"
        self.spoolRoot = spoolRoot
        // A folder whose `.spool` names a spool that is gone, while this live spool has its
        // device and inode (an inode used again), would be swept as gone: it names this one now.
        if let recorded = FileManager.default.contents(atPath: directory + "/.spool"), recorded != Data(spoolRoot.utf8),
           LiveProgress.spoolIsGone(recordedIn: directory, device: UInt64(root.st_dev), inode: UInt64(root.st_ino)) {
            recordSpool()
        }
    }

    /// How long a published range's record stays, whole (`Entry.landed`): twice the longest
    /// interval between a waiter's looks at the shared layer (`SharedLooks`, 15 s), so one look
    /// has counted the range from the sidecar before its record goes.
    public static let landedSeconds = 30.0

    /// `speech-fetch-<uid>-`: the folders of this account's spools.
    static var namePrefix: String { "speech-fetch-\(getuid())-" }

    /// Starts the record of one range a worker of this process fetches (`job`: `<key>.<index>`);
    /// nil when it cannot be made (progress then moves per range, as without it).
    public func begin(job: String) -> Entry? {
        guard prepare() else { return nil }
        let path = "\(directory)/\(job)@\(getpid())"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        return Entry(fd: fd, path: path)
    }

    /// Makes the record folder when missing; false unless it is a folder of this account's
    /// (another account could otherwise plant what this machine's processes read). The process
    /// that makes it records the spool's path there and removes the folders of spools that are
    /// gone: once per folder made, so a busy spool's workers pay nothing more.
    func prepare() -> Bool {
        if mkdir(directory, 0o700) == 0 {
            recordSpool()
            removeFoldersOfGoneSpools()
        } else if errno != EEXIST {
            return false
        }
        var info = stat()
        return lstat(directory, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == getuid()
    }

    /// Removes the folder when it holds nothing but `.spool` (a daemon that drains; another
    /// daemon's worker on this machine may still have a record there, and then it stays).
    public func removeIfUnused() {
        unlink(directory + "/.spool")
        if rmdir(directory) != 0 && errno != ENOENT { recordSpool() }
    }

    /// `.spool`: the spool's path, so a later sweep can tell whether the spool still exists.
    private func recordSpool() {
        let path = directory + "/.spool"
        let temp = "\(path).\(getpid())"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let failure = Array(spoolRoot.utf8).withUnsafeBytes { FileIO.writeAll(fd, $0) }
        close(fd)
        if failure == nil { rename(temp, path) } else { unlink(temp) }
    }

    /// Removes the sibling folders of this account whose spool is gone (see the file's head).
    func removeFoldersOfGoneSpools() {
        let parent = (directory as NSString).deletingLastPathComponent
        let prefix = LiveProgress.namePrefix
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent) else { return }
        for name in names where name.hasPrefix(prefix) && "\(parent)/\(name)" != directory {
            let identity = name.dropFirst(prefix.count).split(separator: "-")
            guard identity.count == 2, let device = UInt64(identity[0]), let inode = UInt64(identity[1]) else { continue }
            let folder = "\(parent)/\(name)"
            var info = stat()
            guard lstat(folder, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == getuid(),
                  LiveProgress.spoolIsGone(recordedIn: folder, device: device, inode: inode),
                  let entries = try? FileManager.default.contentsOfDirectory(atPath: folder),
                  !entries.contains(where: LiveProgress.isRecordOfALiveProcess) else { continue }
            for entry in entries { unlink("\(folder)/\(entry)") }
            rmdir(folder)  // fails, and the folder stays, if a process made a record meanwhile
        }
    }

    /// True only when the folder's `.spool` names a path that is not the spool device:inode any
    /// more (missing, or another inode). No `.spool`, or a path that cannot be looked at now (a
    /// network filesystem that does not answer), is not gone.
    static func spoolIsGone(recordedIn folder: String, device: UInt64, inode: UInt64) -> Bool {
        guard let data = FileManager.default.contents(atPath: folder + "/.spool"), data.count <= 4096,
              let path = String(data: data, encoding: .utf8), path.hasPrefix("/") else { return false }
        var info = stat()
        if stat(path, &info) == 0 { return UInt64(info.st_dev) != device || UInt64(info.st_ino) != inode }
        return errno == ENOENT || errno == ENOTDIR
    }

    /// `<job>@<pid>` (a range's record) or `.<file>.<pid>[.<thread>]` (a record being written)
    /// of a process that still runs.
    static func isRecordOfALiveProcess(_ name: String) -> Bool {
        let pidText: Substring?
        if let at = name.lastIndex(of: "@") {
            pidText = name[name.index(after: at)...]
        } else {
            pidText = name.split(separator: ".").first { !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
        }
        guard let pidText, let pid = Int32(pidText) else { return false }
        return LeaseJudge.processRunning(pid)
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
            guard LeaseJudge.processRunning(pid) else {  // a zombie writes nothing more
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

        /// The range was published: the record holds the range's whole `length` from now until
        /// `remove()`, which the publisher calls `LiveProgress.landedSeconds` later. This node's
        /// waiters count the range whole meanwhile, without a look at the shared filesystem (a
        /// range counts once, whichever source names it), and their next shared look, within
        /// 15 s, counts it from the sidecar.
        public func landed(length: Int64) {
            let due = state.withLock { s -> Bool in
                guard !s.removed else { return false }
                s = (length, Date().timeIntervalSinceReferenceDate, false)
                return true
            }
            if due { _ = ftruncate(fd, off_t(length)) }
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
