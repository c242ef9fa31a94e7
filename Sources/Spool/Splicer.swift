// Splicer - puts completed parts into their staging files and finishes files and requests.
// Any process may run it (supervisor, worker, waiter, a new caller): the staging lock makes
// one of them the writer of a file at a time; the rest leave the parts for it.
import Foundation
import ModelCache

public enum SpliceOutcome: Sendable, Equatable {
    case nothing
    /// Another live process holds the file's staging lock.
    case busy
    case progressed
    case finalized
    case failed(String)
}

public struct Splicer: Sendable {
    public let spool: Spool

    public init(spool: Spool) { self.spool = spool }

    /// Workers write no range in place (Worker's `SPEECH_FETCH_RANGES_IN_PLACE=0`; every process of
    /// every node must then have it): on a network or FUSE filesystem no part is opened twice.
    static let rangesInPlaceOff = ProcessInfo.processInfo.environment["SPEECH_FETCH_RANGES_IN_PLACE"] == "0"

    /// Splices every file that has parts waiting, then settles requests. Returns what happened per file key.
    @discardableResult
    /// `leaving`: plans another process splices (a supervisor leaves another node's plans to that
    /// node's supervisor while it serves: the splicing of a file stays on one node, whatever the
    /// nodes fetching its ranges).
    /// `settlingAlways` false: requests are settled only when a part was spliced, a file found
    /// final or failed (a look between passes that finds nothing to do costs one listing).
    public func spliceAll(leaving: (PlannedFile) -> Bool = { _ in false }, settlingAlways: Bool = true) -> [String: SpliceOutcome] {
        var outcomes: [String: SpliceOutcome] = [:]
        var files: [(plan: PlannedFile, listed: [Int])] = []
        for (key, indices) in spool.partsByFile() {
            switch spool.lookPlan(key) {
            case .found(let plan):
                if leaving(plan) { continue }
                files.append((plan, indices))
            case .absent:
                // A part whose plan is gone belongs to a file that is final or failed.
                spool.dropParts(key: key, indices: indices)
            case .unknown:
                // An unreadable plan is not a missing one: the parts stay for the next pass.
                outcomes[key] = .busy
            }
        }
        // A few files at once (ConcurrentFiles): each file's splice and finalize is a few small
        // writes that wait on their syncs, under the file's own staging lock.
        let spliced = SpliceOutcomes()
        let batch = files
        ConcurrentFiles.forEach(batch.count) { [self] index in
            let file = batch[index]
            spliced.set(file.plan.key, splice(file.plan, listed: file.listed))
        }
        outcomes.merge(spliced.all) { $1 }
        if settlingAlways || outcomes.values.contains(where: { $0 != .nothing && $0 != .busy }) { settleRequests() }
        return outcomes
    }

    /// Splices the parts of one file, records them in its sidecar, and finalizes it when whole.
    /// With `salvagingTempParts` (a caller about to fetch the file itself), the unfinished part of
    /// a range whose worker is gone is copied in too and recorded as that range's `partial`, so
    /// the embedded engine asks only for its tail (the part stays for a worker to adopt).
    /// `listed`: the file's parts a listing of `parts/` just found (the pass's first look uses
    /// them instead of listing again: one listing per pass over every file, not one per file,
    /// which grew with the parts of every other file waiting).
    @discardableResult
    public func splice(_ plan: PlannedFile, salvagingTempParts: Bool = false, listed: [Int]? = nil) -> SpliceOutcome {
        let anchor: TargetAnchor
        switch spool.anchor(plan) {
        case .success(let opened):
            anchor = opened
        case .failure(let refusal) where refusal.transient:
            return .failed(refusal.reason)  // could not open it now: not a verdict on the target
        case .failure(let refusal):
            // A plan pointing out of the cache (planted: a request that points there is never
            // planned), or whose folder was swapped for a link after it was judged, is dropped
            // when it is this node's, else left to its node.
            if plan.node == spool.owner.node {
                spool.recordFailure(plan.key, refusal.failure)
                spool.dropPlan(plan)
            }
            return .failed(refusal.reason)
        }
        // Every write of the pass goes through the directory opened (its /proc/self/fd name).
        return withExtendedLifetime(anchor) {
            splice(plan, into: anchor.directory, salvagingTempParts: salvagingTempParts, listed: listed, told: anchor.told)
        }
    }

    private func splice(_ plan: PlannedFile, into directory: ModelDirectory, salvagingTempParts: Bool, listed: [Int]?,
                        told: (String) -> String) -> SpliceOutcome {
        if directory.isComplete(plan.file) {
            spool.dropPlan(plan)
            return .finalized
        }
        guard let lock = StagingLock.acquire(plan.file.path, in: directory, owner: spool.owner, lease: spool.lease) else {
            return .busy
        }
        // Refreshed on a timer: a long splice (hashing a big prefix) never looks abandoned.
        let held = HeldLocks(lease: spool.lease)
        held.add(lock)
        defer { held.releaseAll() }
        do {
            let staging = try StagingFile(file: plan.file, in: directory, commit: plan.commit, rangeSize: plan.rangeSize)
            // The sidecar this pass writes folds in the one on disk, read again just before
            // (StagingFile.persist): its record may be older than what the previous holder of the
            // lock wrote. On a network filesystem that last read sees the previous holder's write
            // only `spool.settle` seconds after the lock was taken, so a pass with ranges to
            // record writes no sooner; it goes on looking for parts meanwhile.
            var pass = SplicePass(plan: plan, staging: staging, settled: ProcessInfo.processInfo.systemUptime + spool.settle)
            spliceParts(&pass, listed: listed)
            // Under repair a range's bytes are compared whole, never taken in as a prefix.
            let salvaged = salvagingTempParts && !staging.isRepairing && salvageTempParts(plan, staging)
            try record(pass, salvaged: salvaged)
            for part in pass.listed + pass.judged { unlink(part) }
            fetchAgain(plan, pass.reopened)
            // The ranges just recorded leave room in the job window: the next ones are published
            // (a file the window holds whole had every range published by its plan; a repair
            // publishes its own few ranges).
            if plan.rangeCount > JobWindow.size, pass.spliced > 0 || !pass.listed.isEmpty, !staging.isRepairing, !staging.isFullyDone {
                JobWindow.refill(plan, spool: spool, done: staging.doneRanges)
            }
            guard staging.isFullyDone else { return pass.spliced == 0 && pass.listed.isEmpty ? .nothing : .progressed }
            return finalize(plan, staging, told: told)
        } catch {
            return .failed(told("\(error)"))
        }
    }

    /// What one pass over a file's parts did.
    private struct SplicePass {
        let plan: PlannedFile
        let staging: StagingFile
        /// When (system uptime) the sidecar may be written (`spool.settle` after the lock).
        let settled: Double
        /// The ranges the sidecar listed when the pass began.
        let done: Set<Int>
        /// Parts whose range a sidecar read back from the filesystem lists: removed after this
        /// pass. No writer drops a listed range (see `splice`), so every later record lists it too.
        var listed: [String] = []
        var spliced = 0
        /// A file under repair (it did not verify): a part is compared with the staged bytes
        /// instead of copied, and judged at once; its part goes after the sidecar write (a range
        /// may be opened again later, and must then get a new part), and the ranges the judgement
        /// opens get jobs after it.
        var judged: [String] = []
        var reopened: [Int] = []

        init(plan: PlannedFile, staging: StagingFile, settled: Double) {
            self.plan = plan
            self.staging = staging
            self.settled = settled
            done = staging.doneRanges
        }
    }

    /// Splices the parts that are there. Parts that arrive while the pass runs (behind the index
    /// it looks at) are spliced in the same pass: it looks again until a look finds nothing new,
    /// so the last part of a file does not wait for the next pass to be spliced and the file
    /// finalized. A pass ends after 16 new parts, so the next one can drop them (it reads them back).
    private func spliceParts(_ pass: inout SplicePass, listed: [Int]?) {
        let plan = pass.plan
        var seen = Set<Int>()
        var looking = true
        var known = listed
        // A file whose every range is here needs no further look.
        while pass.spliced < 16 && !(pass.spliced > 0 && pass.staging.isFullyDone) {
            if !looking {
                let wait = pass.settled - ProcessInfo.processInfo.systemUptime
                guard pass.spliced > 0, !pass.staging.isFullyDone, wait > 0 else { break }
                // Half a second between looks while the write waits for `settle`: each look is a
                // listing of parts/ at the file server.
                Thread.sleep(forTimeInterval: min(wait, 0.5))
            }
            looking = false
            // One listing per look: the parts of this file that are there (the first look may
            // use the caller's).
            let present = Set(known ?? spool.partsByFile()[plan.key] ?? []).subtracting(seen)
            known = nil
            for index in present.sorted() where pass.spliced < 16 && index >= 0 && index < plan.rangeCount {
                seen.insert(index)
                if spliceOne(index, into: &pass) { looking = true }
            }
        }
    }

    /// Splices (or, under repair, judges) the part of range `index`; true when it was taken in.
    private func spliceOne(_ index: Int, into pass: inout SplicePass) -> Bool {
        let plan = pass.plan
        let staging = pass.staging
        let part = spool.partPath(plan, index)
        if pass.done.contains(index) { pass.listed.append(part); return false }
        // Records come wherever workers write in place: everywhere but where
        // `SPEECH_FETCH_RANGES_IN_PLACE=0` turns it off (there no part is read twice).
        switch staging.isRemote && Splicer.rangesInPlaceOff ? .found(nil) : StagedRangeRecord.look(at: part) {
        case .found(let record?):
            return foldIn(record, part: part, index: index, into: &pass)
        case .unknown:
            return false  // not read now: kept for a later pass
        case .found(nil), .absent:
            break  // a part holding its range's bytes (or gone meanwhile: the copy below fails and keeps nothing)
        }
        do {
            if staging.isRepairing {
                let changed = try staging.spliceComparing(partAt: part, index: index)
                pass.reopened += staging.markRepaired(index, changed: changed)
                pass.judged.append(part)
            } else {
                try staging.splice(partAt: part, index: index)
                staging.markDone(index)
            }
            pass.spliced += 1
            // The hash follows the contiguous prefix part by part, while later ranges still
            // arrive: a pass that splices a whole file does not read it all back at its end
            // (slow through a network filesystem's client).
            try? staging.advanceHash()
            return true
        } catch CacheError.sizeMismatch {
            // A part whose size every look agrees is wrong (StagingFile.splice) is dropped
            // and its range fetched again.
            unlink(part)
            spool.addJobs(plan, indices: [index])
        } catch {
            // Other errors (disk full, I/O, a stale handle, a size that changed between
            // looks) keep the part for a later splice.
        }
        return false
    }

    /// Takes in a range a worker wrote in place: nothing is copied; the range is marked done and
    /// the hash goes on over the staging file, opened afresh now that the record was seen (a
    /// network filesystem's client then serves what the writer synced before it published). A
    /// record that does not name this staging file (its tag and inode: the file was started over
    /// since), or one under repair (whose ranges come as parts, to be compared), is dropped, and a
    /// range not done is fetched again.
    private func foldIn(_ record: StagedRangeRecord, part: String, index: Int, into pass: inout SplicePass) -> Bool {
        let staging = pass.staging
        guard !staging.isRepairing, record.names(staging, index: index) else {
            unlink(part)
            if !staging.isRepairing { spool.addJobs(pass.plan, indices: [index]) }
            return false
        }
        staging.markDone(index)
        staging.readAfreshFromNowOn()
        pass.spliced += 1
        try? staging.advanceHash()
        return true
    }

    /// Copies in the unfinished parts of ranges whose workers are gone and records each as its
    /// range's `partial`; true when any was.
    private func salvageTempParts(_ plan: PlannedFile, _ staging: StagingFile) -> Bool {
        var salvaged = false
        let finished = staging.doneRanges
        for index in 0..<plan.rangeCount where !finished.contains(index) && spool.hasPart(plan, index) == false {
            let r = staging.range(index)
            // A range a gone worker of this node wrote in place into this very staging file: its
            // bytes are there already (in this machine's page cache; this pass's record syncs the
            // staging file before its sidecar lists them).
            if let tag = staging.stagingTag,
               let gone = spool.goneParts(of: plan.jobName(index), rangeLength: r.end - r.start + 1, stagingTag: tag),
               gone.size > staging.partialBytes(index) {
                staging.recordPartial(index, bytes: gone.size)
                salvaged = true
                continue
            }
            guard let gone = spool.goneParts(of: plan.jobName(index), rangeLength: r.end - r.start + 1),
                  gone.size > staging.partialBytes(index),
                  let copied = try? staging.splicePrefix(partAt: gone.path, index: index), copied > 0 else { continue }
            staging.recordPartial(index, bytes: copied)
            salvaged = true
        }
        return salvaged
    }

    /// Records the pass in the sidecar, once `settled`. A file whose every range is here is
    /// finalized without a record of its last ranges: if finalizing fails for a moment, their
    /// parts are still there for the next pass. Under repair the judgements are recorded first
    /// (the judged parts go after).
    private func record(_ pass: SplicePass, salvaged: Bool) throws {
        let staging = pass.staging
        guard (salvaged || pass.spliced > 0) && (!staging.isFullyDone || staging.isRepairing) else { return }
        let wait = pass.settled - ProcessInfo.processInfo.systemUptime
        if wait > 0 { Thread.sleep(forTimeInterval: wait) }
        if pass.spliced > 0 { try staging.advanceHash() }
        try staging.persist()  // synced before recorded; durable before the parts go (at the next pass)
    }

    /// Checks a whole file and renames it into place, or hands it to its repair, or records its
    /// failure.
    private func finalize(_ plan: PlannedFile, _ staging: StagingFile, told: (String) -> String) -> SpliceOutcome {
        do {
            try staging.finalize()
        } catch CacheError.repairing(_, let ranges) {
            // It did not verify: kept, and these ranges are fetched again and compared.
            fetchAgain(plan, ranges)
            return .progressed
        } catch let error as CacheError where error.isTransient {
            // Could not look (a stale handle, EIO): the file is not bad; finish it next pass.
            return .failed(told("\(error)"))
        } catch {
            spool.recordFailure(plan.key, FailureRecord(FailureKind(error), told("\(error)")))
            spool.dropPlan(plan)
            return .failed(told("\(error)"))
        }
        spool.dropPlan(plan)
        return .finalized
    }

    /// Makes ready jobs for ranges a repair took out of `done` (the sidecar saying so is
    /// written). A part such a range still has is its first fetch, already in the staging file
    /// (parts are dropped a pass after the sidecar lists them): it goes, or it would be judged
    /// as the new fetch.
    private func fetchAgain(_ plan: PlannedFile, _ ranges: [Int]) {
        for index in ranges { unlink(spool.partPath(plan, index)) }
        spool.addJobs(plan, indices: ranges)
    }

    /// Marks requests done when every file is final, failed when one of their files failed.
    public func settleRequests() {
        // Another node's request is settled by that node while it serves (a failure recorded here
        // bumps the generation, which wakes it).
        // One listing of failures/ (usually empty) instead of a look for each missing file's.
        let noFailures = spool.hasNoFailures()
        for request in spool.activeRequests(skipping: spool.servedElsewhere) {
            if spool.targets?.cachedRefusal(request) != nil { continue }  // never written to (Planner fails it)
            // Looked at, and its ref written, through the directory opened by its judged path.
            let anchor: TargetAnchor
            switch spool.anchor(request, creating: false) {
            case .success(let opened): anchor = opened
            case .failure(let refusal) where refusal.replaced:
                spool.markFailed(request.id, FailureRecord(.refused, "the request for \(request.repo) is refused: \(refusal.reason)"))
                continue
            case .failure:
                // Not there (or not openable) now: nothing in it is final, but a file's recorded
                // failure (its folder could not be made) still fails the request.
                settle(request, in: nil)
                continue
            }
            withExtendedLifetime(anchor) { settle(request, in: anchor.directory, noFailures: noFailures) }
        }
    }

    private func settle(_ request: SpoolRequest, in directory: ModelDirectory?, noFailures: Bool = false) {
        if noFailures, let directory {
            // No file of any request failed: the request is active while one file is not
            // final. A file once final stays so, so the look resumes at the first file the
            // last one found missing (a look over every file at each settle grew with the
            // files times the parts spliced); the request is done only after one more look
            // over all of them (a file may have been removed meanwhile).
            let files = request.files
            var next = spool.settleResume(request.id)
            while next < files.count && directory.isComplete(files[next]) { next += 1 }
            if next < files.count {
                spool.noteSettleResume(request.id, next)
                return
            }
            spool.noteSettleResume(request.id, nil)
            guard files.allSatisfy(directory.isComplete) else { return }
            try? directory.recordRevision(request.revision)
            spool.markDone(request.id)
            return
        }
        var complete = true
        for file in request.files where directory?.isComplete(file) != true {
            complete = false
            let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
            if let failure = spool.failure(of: key) {
                spool.markFailed(request.id, failure.of(file: file.path))
                break
            }
        }
        if complete {
            // A detached request has no caller left to record the ref: the settler does.
            try? directory?.recordRevision(request.revision)
            spool.markDone(request.id)
        }
    }
}

/// What each file of a concurrent splice pass came to.
private final class SpliceOutcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var byKey: [String: SpliceOutcome] = [:]
    func set(_ key: String, _ outcome: SpliceOutcome) { lock.withLock { byKey[key] = outcome } }
    var all: [String: SpliceOutcome] { lock.withLock { byKey } }
}
