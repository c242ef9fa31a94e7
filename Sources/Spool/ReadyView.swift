// ReadyView - the last listing of `jobs/ready`, shared in RAM by the worker processes of this
// machine, so that a wake-up costs the file server one listing per node, not one per process,
// and a slot that finishes a range does not list a folder known to be empty.
//
// Two files beside LiveProgress's records on /dev/shm: `.ready-epoch`, a 64-bit counter that
// every process bumps when it learns that `jobs/ready` may have gained a job (inotify saw one
// arrive from this machine, or the wake word said another node's generation moved), and
// `.ready`, the names one process listed, tagged with the epoch it read *before* listing. A
// listing is used only while the epoch still has that value and it is younger than `maxAge`, so
// a job published after someone started listing is never hidden by that listing: the bump that
// announced it makes the listing's tag stale. A job that another node took since the listing
// costs one failed try (a claim is a rename; the loser's is ENOENT), and a scan whose tries all
// fail lists afresh. Nothing here is on the shared filesystem.
import Foundation
import ModelCache
import SharedFiles

public struct ReadyView: Sendable {
    let recordPath: String
    let epochPath: String
    /// Held (flock, this machine only) by the one process listing `jobs/ready` for the others.
    let listerPath: String
    let directory: String
    let live: LiveProgress
    /// A listing older than this is listed again even when no wake-up said it changed: the
    /// safety net under a wake-up that was lost.
    static let maxAge: UInt64 = 5_000_000_000

    /// The view of `spool`'s ready jobs on this machine, or nil without a writable /dev/shm.
    public init?(spool: Spool) {
        guard let live = LiveProgress(spool: spool) else { return nil }
        self.live = live
        directory = live.directory
        recordPath = live.directory + "/.ready"
        epochPath = live.directory + "/.ready-epoch"
        listerPath = live.directory + "/.ready-lister"
    }

    /// The epoch now (nil when the counter cannot be opened: then nothing is shared). A counter
    /// made afresh starts at a random value, so a listing tagged before the files were removed
    /// (a daemon's drain) cannot match a new counter that counted up to its tag.
    public func epoch() -> UInt64? {
        withCounter(exclusive: false) { $0 }
    }

    /// Something may have arrived in `jobs/ready`: listings taken so far are stale.
    public func invalidate() {
        _ = withCounter(exclusive: true) { $0 &+ 1 }
    }

    /// The wake word moved to `word` (another node's change, or a marker): listings taken so far
    /// are stale — once per value of the word for the whole machine, not once per process that
    /// it woke (every worker process of the node wakes on the same bump; each bumping the epoch
    /// made each one's listing stale for the next, so every process listed).
    public func invalidate(forWord word: UInt32) {
        _ = withCounter(exclusive: true, wordSeen: word) { $0 &+ 1 }
    }

    /// The names in `jobs/ready` at `epoch`: the shared listing when it is current, else `list()`
    /// run by one process of the machine at a time (the others, woken by the same change, wait
    /// for its listing and use it), then shared.
    /// A listing that failed (`list()` gives nil: a stale handle, EIO) is not shared: the others
    /// would take it for an empty folder until the next wake-up.
    public func listing(at epoch: UInt64, list: () -> [String]?) -> [String]? {
        if let names = names(at: epoch) { return names }
        guard live.prepare() else { return list() }
        return MachineFiles.oneAtATime(listerPath) {
            // A process that held the lock before us listed at this epoch (it read the epoch
            // before its listing, as we did): its listing is as fresh as ours would be.
            if let names = names(at: epoch) { return names }
            guard let names = list()?.sorted() else { return nil }
            store(names, at: epoch)
            return names
        }
    }

    /// The names listed at `epoch` (sorted), when that listing is still the current one.
    public func names(at epoch: UInt64) -> [String]? {
        guard let record = record(), record.tag == epoch, MonotonicClock.nanoseconds() &- record.listedAt < ReadyView.maxAge
        else { return nil }
        return record.names
    }

    /// The shared record as written: its tag, when it was listed, and the names; nil when there
    /// is none or it is not one of ours (only this account can write the folder, LiveProgress
    /// checks it, but a name that is not a job's still means the record was not written here).
    private func record() -> (tag: UInt64, listedAt: UInt64, names: [String])? {
        guard let data = FileManager.default.contents(atPath: recordPath),
              let text = String(data: data, encoding: .utf8) else { return nil }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let header = lines.first else { return nil }
        let fields = header.split(separator: " ")
        guard fields.count == 2, let tag = UInt64(fields[0]), let at = UInt64(fields[1]) else { return nil }
        lines.removeFirst()
        let names = lines.filter { !$0.isEmpty }.map(String.init)
        guard names.allSatisfy({ PlannedFile.parseJob($0) != nil }) else { return nil }
        return (tag, at, names)
    }

    /// Shares `names`, listed after reading `epoch`.
    public func store(_ names: [String], at epoch: UInt64) {
        write(names, at: epoch, listedAt: MonotonicClock.nanoseconds())
    }

    /// This process claimed `name`: the shared listing no longer offers it to the others.
    public func taken(_ name: String, at epoch: UInt64) {
        _ = withCounter(exclusive: true) { current -> UInt64 in
            guard current == epoch, let names = self.names(at: epoch), names.contains(name),
                  let record = self.record() else { return current }
            self.write(names.filter { $0 != name }, at: epoch, listedAt: record.listedAt)
            return current
        }
    }

    /// Removes both files (a daemon that drains); a process that looks again makes them anew.
    public func remove() {
        unlink(recordPath)
        unlink(epochPath)
        unlink(listerPath)
        // And what a process killed while writing the record left (`.ready.<pid>.<thread>`).
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(".ready.") {
            unlink(directory + "/" + name)
        }
    }

    private func write(_ names: [String], at epoch: UInt64, listedAt: UInt64) {
        guard live.prepare() else { return }
        MachineFiles.replace(recordPath, with: "\(epoch) \(listedAt)\n" + names.map { $0 + "\n" }.joined())
    }

    /// Runs `body` on the counter under its lock and stores what it returns when `exclusive`.
    /// With `wordSeen`, the file's second 8 bytes hold the last wake word that ran `body`: a word
    /// seen already leaves the counter as it is.
    private func withCounter(exclusive: Bool, wordSeen: UInt32? = nil, _ body: (UInt64) -> UInt64) -> UInt64? {
        guard live.prepare() else { return nil }
        let fd = open(epochPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var value: UInt64 = 0
        // A counter too short to hold a value (just made) is started under the exclusive lock.
        for lockMode in exclusive ? [LOCK_EX] : [LOCK_SH, LOCK_EX] {
            while flock(fd, lockMode) != 0 { guard errno == EINTR else { return nil } }
            if withUnsafeMutableBytes(of: &value, { pread(fd, $0.baseAddress, 8, 0) }) == 8 { break }
            guard lockMode == LOCK_EX else { continue }
            value = UInt64.random(in: 0...UInt64.max)
            guard withUnsafeBytes(of: &value, { pwrite(fd, $0.baseAddress, 8, 0) }) == 8 else { return nil }
        }
        if exclusive, let word = wordSeen {
            // The word as last seen, stored one above its value (0: none seen yet).
            var stored: UInt64 = 0
            _ = withUnsafeMutableBytes(of: &stored) { pread(fd, $0.baseAddress, 8, 8) }
            if stored == UInt64(word) + 1 { return value }
            var mark = UInt64(word) + 1
            guard withUnsafeBytes(of: &mark, { pwrite(fd, $0.baseAddress, 8, 8) }) == 8 else { return nil }
        }
        let next = body(value)
        if exclusive && next != value {
            var stored = next
            guard withUnsafeBytes(of: &stored, { pwrite(fd, $0.baseAddress, 8, 0) }) == 8 else { return nil }
        }
        return exclusive ? next : value
    }
}
