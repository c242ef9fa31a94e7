// JobWindow - how many range jobs of one file are published at once (docs/protocol.md, "Job
// window"). A plan publishes the first ranges it needs, up to the window; whoever splices parts
// of the file publishes the next ones as ranges become done, so a file declaring a terabyte makes
// a window of job files, not one per range. A range outside the window is not lost: it is
// published when the window has room, by the splicer or by the repair of lost jobs.
import Foundation
import SharedFiles

public enum JobWindow {
    /// Ranges of one file in flight at most (ready, claimed, or published as a part not yet
    /// recorded): enough for every slot of ten nodes of 16 ranges each on one file.
    /// `SPEECH_FETCH_JOB_WINDOW` sets it (tests), at least 1.
    public static var size: Int {
        get { setting.withLock { $0 } }
        set { setting.withLock { $0 = max(1, newValue) } }
    }

    private static let setting = LockedValue<Int>({
        if let raw = ProcessInfo.processInfo.environment["SPEECH_FETCH_JOB_WINDOW"], let n = Int(raw), n > 0 { return n }
        return 256
    }())

    /// The ranges of `plan` in flight now: ready, claimed or with a part, and not `done`. Looked at
    /// in the order a job moves (ready, claimed, part), so a job that moves meanwhile is seen at a
    /// later stage, never missed; nil when a folder cannot be listed.
    static func inFlight(_ plan: PlannedFile, spool: Spool, done: Set<Int>) -> (ranges: Set<Int>, claimed: Set<String>)? {
        let prefix = plan.key + "."
        guard let ready = spool.lookReadyJobs(), let claimed = spool.claimedJobs() else { return nil }
        var ranges = Set<Int>()
        for job in ready where job.hasPrefix(prefix) { if let (_, i) = PlannedFile.parseJob(job) { ranges.insert(i) } }
        for job in claimed where job.hasPrefix(prefix) { if let (_, i) = PlannedFile.parseJob(job) { ranges.insert(i) } }
        guard let parts = SharedFS.names(spool.layout.path(.parts)) else { return nil }
        for name in parts where name.hasPrefix(prefix) {
            if let job = SpoolLayout.partJob(name), let (_, i) = PlannedFile.parseJob(job) { ranges.insert(i) }
        }
        return (ranges.subtracting(done), claimed)
    }

    /// The first ranges of `pending` (in order) that fit the window beside `inFlight` ranges.
    public static func fitting(_ pending: [Int], inFlight: Int) -> [Int] {
        Array(pending.sorted().prefix(max(0, size - inFlight)))
    }

    /// Publishes the next ranges of `plan` the window has room for: those neither `done` nor in
    /// flight, lowest first. `done` must be what the file's sidecar says now (the splicer's record,
    /// written under the file's staging lock). Returns the ranges made ready.
    @discardableResult
    public static func refill(_ plan: PlannedFile, spool: Spool, done: Set<Int>) -> [Int] {
        guard done.count < plan.rangeCount, let (flying, claimed) = inFlight(plan, spool: spool, done: done) else { return [] }
        guard flying.count < size else { return [] }
        var next: [Int] = []
        var index = 0
        while next.count < size - flying.count && index < plan.rangeCount {
            if !done.contains(index) && !flying.contains(index) { next.append(index) }
            index += 1
        }
        if !next.isEmpty { spool.addJobs(plan, indices: next, claimed: claimed) }
        return next
    }
}

/// A value behind a lock.
final class LockedValue<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T

    init(_ value: T) { self.value = value }

    func withLock<R>(_ body: (inout T) -> R) -> R { lock.withLock { body(&value) } }
}
