// StagingLock - the lease that makes one process the only writer of a staging file's sidecar.
//
// `.incomplete/<staging name>.lock` is created with O_EXCL and names its holder
// (`node@pid`); the holder refreshes its mtime. Anyone may break it when the holder is a dead
// process on this node, or when its mtime is older than the lease time on the filesystem's clock.
import Foundation
import HubTypes
import SharedFiles

public final class StagingLock: @unchecked Sendable {
    public let path: String
    public let owner: LockOwner
    /// The lock file's inode when taken: refresh and release act only on this one.
    private let inode: UInt64

    /// Locks this process holds (paths): a lock naming our pid that is not here is stale.
    private static let registry = LockedSet()

    private init(path: String, owner: LockOwner, inode: UInt64) {
        self.path = path
        self.owner = owner
        self.inode = inode
        StagingLock.registry.insert(path)
    }

    /// Takes the lock for `repoPath` in `directory`, breaking a dead or expired one. Nil when a
    /// live holder has it, or when whether it does cannot be read (a stale handle: look again later),
    /// and also when the lock cannot be created at all (`take` says why: use it where a caller
    /// would otherwise wait for a holder that does not exist).
    public static func acquire(_ repoPath: String, in directory: ModelDirectory, owner: LockOwner, lease: Double) -> StagingLock? {
        (try? take(repoPath, in: directory, owner: owner, lease: lease)) ?? nil
    }

    /// `acquire`, but a lock that cannot be created for any reason other than "it exists"
    /// (`EACCES`, `EROFS`, `ENAMETOOLONG`, `ENOSPC`, an `EIO` that outlived its retries, …) is
    /// `CacheError.io` naming the lock file: never "held elsewhere", which would be waited for.
    public static func take(_ repoPath: String, in directory: ModelDirectory, owner: LockOwner, lease: Double) throws -> StagingLock? {
        try ModelDirectory.makeDirectories(directory.stagingDirectory.path)
        return try take(lockPath: directory.stagingPath(ModelLayout.lockName(repoPath)), owner: owner, lease: lease)
    }

    /// `take` by the lock file's path in an existing `.incomplete/` (an entry read back from the
    /// folder, whose repo path a hashed staging name does not give back).
    static func take(lockPath path: String, owner: LockOwner, lease: Double) throws -> StagingLock? {
        let staging = (path as NSString).deletingLastPathComponent
        for _ in 0..<3 {
            let fd = SharedFS.retry { open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
            if fd >= 0 {
                let tag = Array(owner.description.utf8)
                _ = tag.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                // Not synced: the holder's name outlives a kill in the page cache, and reaches
                // other clients of a network filesystem at close; a power loss ends every holder
                // of this node, and a lock it left empty is judged by its age (docs/protocol.md,
                // "The staging lock"). A sync here was two of a small file's five under the daemon.
                var st = stat()
                let known = SharedFS.retry { fstat(fd, &st) } == 0
                close(fd)
                // Without its inode the lock cannot be told from a successor's: give it up.
                guard known || { if case .found(let s) = SharedFS.lstat(path) { st = s; return true }; return false }() else {
                    unlink(path)
                    return nil
                }
                return StagingLock(path: path, owner: owner, inode: UInt64(st.st_ino))
            }
            if errno == ENOENT {
                // `.incomplete/` went between its making and this create: another file's holder
                // released the last entry and removed the folder (StagingFile.removeStagingIfEmpty),
                // as a pass that plans or splices several files at once does all the time.
                try ModelDirectory.makeDirectories(staging)
                continue
            }
            guard errno == EEXIST else {
                throw CacheError.io(path: path, operation: "create the staging lock", errno: errno)
            }
            let judged: stat
            switch SharedFS.lstat(path) {
            case .found(let st): judged = st
            case .absent: continue          // released meanwhile: try to take it
            case .unknown: return nil       // cannot be judged now
            }
            guard isStale(path, localNode: owner.node, lease: lease, probe: staging) else { return nil }
            // Another node's lock, judged by its lease: every live node sees it expire at about
            // the same moment, and a network filesystem's client may answer from what it cached
            // up to a second ago. Judged again after a pause (jittered), so a breaker that was
            // a moment late sees the lock the first one took, instead of moving it aside.
            if holderNode(path) != owner.node {
                Thread.sleep(forTimeInterval: StagingLock.secondLook + Double.random(in: 0...1))
                guard case .found(let again) = SharedFS.lstat(path), again.st_ino == judged.st_ino,
                      isStale(path, localNode: owner.node, lease: lease, probe: staging) else { return nil }
            }
            // Break it: move it aside under a unique name, then make sure what moved is the lock
            // judged stale. If another breaker already replaced it with a fresh lock, put that back.
            let grave = ModelLayout.brokenLockPath(path, node: owner.node, pid: owner.pid, n: UInt32.random(in: 0...UInt32.max))
            guard rename(path, grave) == 0 else { continue }
            if case .found(let moved) = SharedFS.lstat(grave), moved.st_ino == judged.st_ino {
                unlink(grave)
            } else {
                // Another lock, or one we cannot see: put it back; it is not ours to break.
                link(grave, path)  // fails with EEXIST only if yet another lock appeared: then it wins
                unlink(grave)
                return nil
            }
        }
        return nil
    }

    /// Seconds between the two looks that must both find another node's lock expired before it
    /// is broken: more than a network filesystem client's entry and attribute caches keep.
    public static let secondLook = 2.0

    /// The node a lock names; nil when it cannot be read.
    static func holderNode(_ path: String) -> String? {
        guard let data = SharedFS.read(path, limit: 4096).value else { return nil }
        return LockOwner(tag: String(decoding: data, as: UTF8.self))?.node
    }

    /// True when the holder is positively gone: a lock naming this process that it does not
    /// hold, or what the lease judge (`LeaseRound.liveness`) calls expired: a local holder whose
    /// pid is not running, or a lock not refreshed within `lease` on the filesystem's clock
    /// (`probe`, a directory on the same filesystem, is touched and read back). Anything that
    /// cannot be read (a stale handle, EIO, the lock vanishing while looked at) is unknown and
    /// answers false: only a lease read successfully on the server's clock breaks another node's lock.
    public static func isStale(_ path: String, localNode: String, lease: Double, probe: String) -> Bool {
        guard let data = SharedFS.read(path, limit: 4096).value else { return false }
        let holder = LockOwner(tag: String(decoding: data, as: UTF8.self))
        if let holder, holder.node == localNode, holder.pid == getpid() { return !registry.contains(path) }
        return LeaseJudge(localNode: localNode, lease: lease, probe: probe).round().liveness(of: path, holder: holder) == .expired
    }

    /// True while the lock file is still the one this holder created; nil when that cannot be read.
    public var held: Bool? {
        switch SharedFS.lstat(path) {
        case .found(let st): return UInt64(st.st_ino) == inode
        case .absent: return false
        case .unknown: return nil
        }
    }

    /// Refreshes the lease; false only when the lock was positively broken (the holder must stop
    /// writing). A refresh that cannot be done now is tried again at the next one.
    @discardableResult
    public func refresh() -> Bool {
        guard let held else { return true }
        guard held else { return false }
        _ = SharedFS.touch(path)
        return true
    }

    /// Gives the lock up (only if it is still ours) and removes the staging folder if nothing
    /// else is left in it.
    public func release() {
        StagingLock.registry.remove(path)
        if held == true { unlink(path) }
        rmdir((path as NSString).deletingLastPathComponent)
    }
}

extension ModelDirectory {
    /// After a successful download: removes each staging lock whose holder was a process of
    /// this node that is gone (the lease judge, `StagingLock.isStale`) and that guards no staged
    /// bytes (a lock and nothing else of its file), then `.incomplete/` when that leaves it
    /// empty. A live holder's lock, another node's (only its lease can break it, and waiting
    /// for a second look is `speech cache clean`'s job, not a download's) and a resume point stay.
    public func sweepDeadLocks(localNode: String, lease: Double) {
        let staging = stagingDirectory.path
        var groups: [String: [String]] = [:]
        for entry in FileTree.names(staging) { groups[ModelLayout.owner(ofEntry: entry), default: []].append(entry) }
        for (name, entries) in groups where !ModelLayout.holdsStagedFile(name, entries: entries) {
            for entry in entries where ModelLayout.isLock(entry, of: name) {
                let path = staging + "/" + entry
                guard let data = SharedFS.read(path, limit: 4096).value,
                      let holder = LockOwner(tag: String(decoding: data, as: UTF8.self)),
                      holder.node == localNode, holder.pid != getpid(), !LeaseJudge.processRunning(holder.pid) else { continue }
                // Taken (which breaks the dead holder's lock under the usual rules), then given up.
                if let lock = (try? StagingLock.take(lockPath: path, owner: LockOwner(node: localNode), lease: lease)) ?? nil {
                    lock.release()
                }
            }
        }
        rmdir(staging)  // fails harmlessly while anything is left
    }
}

/// Locks a run holds, refreshed every lease/4 whatever the run is doing (a retry ladder or a
/// long hash cannot let them expire), released together. The refreshing is the process's
/// (`LockRefresher`): one timer for every run that holds locks, not one per run (a planner or
/// splicer holds a small file's lock for a moment, and a timer made and cancelled for each of ten
/// thousand files kept Dispatch's manager thread busy).
public final class HeldLocks: @unchecked Sendable {
    private let lock = NSLock()
    private var locks: [StagingLock] = []
    private var lost = false
    private let refresher: LockRefresher
    private var id: ObjectIdentifier { ObjectIdentifier(self) }

    public init(lease: Double) {
        refresher = LockRefresher.every(LeaseJudge.refreshInterval(lease: lease, atLeast: 0.05))
        refresher.enroll(self, as: id)
    }

    deinit { refresher.withdraw(id) }

    public func add(_ staging: StagingLock) { lock.withLock { locks.append(staging) } }

    /// True when a lock was broken by someone else while held.
    public var anyLost: Bool { lock.withLock { lost } }

    fileprivate func refreshAll() {
        let current = lock.withLock { locks }
        let broken = current.contains { !$0.refresh() }
        if broken { lock.withLock { lost = true } }
    }

    public func releaseAll() {
        refresher.withdraw(id)
        let current = lock.withLock { defer { locks.removeAll() }; return locks }
        for l in current { l.release() }
    }
}

/// The one timer of a process (per refresh interval) that refreshes the locks of every run
/// holding some (`HeldLocks`), every interval. It runs while a run is enrolled and stops with the
/// last one, so a process holding no lock has no timer. A run enrolled between two ticks is
/// refreshed at the next one: never later than an interval after it took its locks, as with a
/// timer of its own.
final class LockRefresher: @unchecked Sendable {
    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var byInterval: [Double: LockRefresher] = [:]

    /// The process's refresher for `interval` seconds.
    static func every(_ interval: Double) -> LockRefresher {
        registryLock.withLock {
            if let known = byInterval[interval] { return known }
            let made = LockRefresher(interval: interval)
            byInterval[interval] = made
            return made
        }
    }

    private let interval: Double
    private let lock = NSLock()
    private var runs: [ObjectIdentifier: Enrolled] = [:]
    private var timer: DispatchSourceTimer?

    private init(interval: Double) { self.interval = interval }

    /// A run, held weakly: one that ends without releasing (dropped) leaves in its deinit.
    private struct Enrolled {
        weak var run: HeldLocks?
    }

    func enroll(_ run: HeldLocks, as id: ObjectIdentifier) {
        lock.withLock {
            runs[id] = Enrolled(run: run)
            guard timer == nil else { return }
            let made = DispatchSource.makeTimerSource(queue: .global())
            made.schedule(deadline: .now() + interval, repeating: interval)
            made.setEventHandler { [weak self] in self?.tick() }
            made.resume()
            timer = made
        }
    }

    func withdraw(_ id: ObjectIdentifier) {
        lock.withLock {
            guard runs.removeValue(forKey: id) != nil, runs.isEmpty else { return }
            timer?.cancel()
            timer = nil
        }
    }

    /// True while a timer runs (some run is enrolled).
    var isTicking: Bool { lock.withLock { timer != nil } }

    private func tick() {
        let current = lock.withLock { runs.values.compactMap(\.run) }
        for run in current { run.refreshAll() }
    }
}

/// A set of paths shared between threads, told apart by their bytes (the locks of `é` in NFC
/// and in NFD are two locks).
final class LockedSet: @unchecked Sendable {
    private let lock = NSLock()
    private var items = Set<PathBytes>()
    func insert(_ s: String) { lock.withLock { _ = items.insert(PathBytes(s)) } }
    func remove(_ s: String) { lock.withLock { _ = items.remove(PathBytes(s)) } }
    func contains(_ s: String) -> Bool { lock.withLock { items.contains(PathBytes(s)) } }
}
