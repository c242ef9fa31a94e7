// Planner - what a supervisor does on every pass before its workers can start: turns requests
// into range jobs (under each file's staging lock, from what its sidecar already holds), and
// repairs jobs lost to a planner or splicer that died half way.
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool

/// Turns requests into range jobs (what a supervisor does on every pass).
public struct Planner: Sendable {
    public let spool: Spool
    public let rangeSize: Int64
    /// Plan only requests made on this node (`speech-fetchd --own-requests`).
    public let ownRequestsOnly: Bool

    /// Ranges the previous repair found lost, by file key: a range is made ready again only when
    /// the next repair finds it lost too.
    private let suspects = LostRanges()
    /// Counts the range jobs planned, for `--metrics`.
    let metrics: DaemonMetrics?

    public init(spool: Spool, rangeSize: Int64, ownRequestsOnly: Bool = false, metrics: DaemonMetrics? = nil) {
        self.spool = spool
        self.rangeSize = rangeSize
        self.ownRequestsOnly = ownRequestsOnly
        self.metrics = metrics
    }

    /// Plans every file of every active request that is neither final, planned nor failed.
    public func planRequests() {
        for request in spool.activeRequests() {
            if ownRequestsOnly && request.node != spool.owner.node { continue }
            // The node that asked plans its request while it serves (woken by the request's
            // arrival); the others only once it is gone.
            if spool.servedElsewhere(request) { continue }
            if !spool.acceptsTarget(of: request) { continue }
            // Smallest first: the small files a loader reads first (config.json, the tokenizer)
            // get their jobs before a big file's ranges fill the queue.
            // One listing of failures/ (usually empty) instead of a look for each file's.
            let noFailures = spool.hasNoFailures()
            let wanted = request.files.sorted(by: { $0.size < $1.size }).filter { file in
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                // Planned only when the plan is positively absent (an unreadable one may stand).
                // The plan is looked at first: a pass while thousands of small files are in flight
                // finds most of them planned (a stat, the plan remembered), and looks no further.
                return spool.lookPlan(key).isAbsent && !request.directory.isComplete(file)
                    && (noFailures || spool.failure(of: key) == nil)
            }
            guard !wanted.isEmpty else { continue }
            // The staging lock, file and sidecar are made through the directory opened by its
            // judged path (TargetAnchor): a folder swapped for a link since is not followed.
            switch spool.anchor(request) {
            case .success(let anchor):
                // The claims, listed once for every file of the pass (Spool.plan says why a
                // listing made before a file's plan was found absent will do).
                let claimed = spool.claimedJobs()
                // A few files at once (ConcurrentFiles): each plan is a few small writes that wait
                // on their syncs, and a repo of thousands of small files is planned in a fraction
                // of the time one after the other took. Each file still has its own staging lock.
                withExtendedLifetime(anchor) {
                    ConcurrentFiles.forEach(wanted.count) { [self] index in
                        plan(wanted[index], of: request, in: anchor.directory, claimed: claimed, told: anchor.told)
                    }
                }
            case .failure(let refusal) where refusal.replaced:
                spool.markFailed(request.id, FailureRecord(.refused, "the request for \(request.repo) is refused: \(refusal.reason)"))
            case .failure(let refusal) where refusal.retryable:
                continue  // a stale handle or I/O error: the next pass plans it
            case .failure(let refusal):
                // Its folder cannot be made or opened (a read-only parent): the request fails
                // saying so, rather than waiting for a plan that cannot be made.
                for file in wanted {
                    spool.recordFailure(PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit),
                                        refusal.failure)
                }
            }
        }
    }

    private func plan(_ file: RepoFile, of request: SpoolRequest, in directory: ModelDirectory, claimed: Set<String>?,
                      told: (String) -> String) {
        if file.size == 0 {
            try? directory.placeEmptyFile(file)
            return
        }
        let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
        if file.size <= rangeSize, case .absent = SharedFS.lstat(directory.stagingPath(ModelLayout.lockName(file.path))),
           case .absent = Sidecar.look(file.path, in: directory) {
            // One range, no sidecar and nobody writing it: nothing of the file is done or kept, and
            // its plan writes nothing into the model directory (no staging file: the splicer makes
            // the one it fills, under the lock), so it is planned without taking the lock; its job
            // and plan are made once by name whoever else plans it (docs/protocol.md, "Steps",
            // plan). A lock taken and given up per small file was two of the supervisor's five file
            // creations per file. A lock there (the embedded engine writing it) is judged below.
            planOneRange(file, of: request, claimed: claimed)
            return
        }
        // The staging file and sidecar are made (or validated) under the lock; the ranges the
        // sidecar already lists are not planned again, in the range size it already uses.
        let taken: StagingLock?
        do {
            taken = try StagingLock.take(file.path, in: directory, owner: spool.owner, lease: spool.lease)
        } catch let error as CacheError where error.isTransient {
            return  // could not look now (a stale handle): the next pass plans it
        } catch {
            // The lock cannot be made at all (a read-only directory, a name the filesystem
            // refuses): the request fails saying so, rather than waiting for a holder that is not there.
            spool.recordFailure(key, FailureRecord(FailureKind(fetching: error), told("\(error)")))
            return
        }
        guard let lock = taken else { return }
        let held = HeldLocks(lease: spool.lease)
        held.add(lock)
        defer { held.releaseAll() }
        guard spool.lookPlan(key).isAbsent, !directory.isComplete(file) else { return }
        if request.fetchesNatively(file) {
            planXet(file, of: request)  // one job; its claimant stages the file (XetJob)
            return
        }
        if file.size <= rangeSize, case .absent = Sidecar.look(file.path, in: directory) {
            // One range and no sidecar: nothing of the file is done or kept (a staging file found
            // without a sidecar starts afresh), so its plan needs no staging file: the splicer
            // makes the one it fills. Two files made and one unlinked per small file were a third
            // of the daemon's file creations for a repo of small files.
            planOneRange(file, of: request, claimed: claimed)
            return
        }
        let staging: StagingFile
        do {
            staging = try StagingFile(file: file, in: directory, commit: request.commit, rangeSize: rangeSize)
        } catch let error as CacheError where error.isTransient {
            return  // the sidecar or staging file could not be read now: the next pass plans it
        } catch {
            // Unplannable here (no libcrypto, the disk refuses the staging file): the request
            // fails with the reason instead of leaving its waiters to time out.
            spool.recordFailure(key, FailureRecord(FailureKind(fetching: error), told("\(error)")))
            return
        }
        let planned = PlannedFile(repo: request.repo, modelDir: request.modelDir, commit: request.commit, file: file,
                                  rangeSize: staging.rangeSize, node: request.node, layout: request.layout,
                                  endpoint: request.endpoint)
        let done = staging.doneRanges
        // A sidecar that was there is left as it is: the record read from it may be older than
        // the file's last writer's (a network filesystem's client), and is not written back.
        // A file of one range has no sidecar to write: nothing of it is done, and its one part is
        // spliced and the file finalized without a record (two syncs a file saved, which were most
        // of planning many small files); a splicer that finds its staging file without a sidecar
        // starts it afresh, as it would.
        if !staging.openedFromRecord && planned.rangeCount > 1 { try? staging.persist() }
        // The first ranges it needs, up to the job window: the splicer publishes the next ones as
        // ranges become done (JobWindow).
        let pending = JobWindow.fitting((0..<planned.rangeCount).filter { !done.contains($0) }, inFlight: 0)
        if (try? spool.plan(planned, pending: pending, claimed: claimed)) != nil { metrics?.planned(pending.count) }
    }

    /// Publishes the plan of a file fetched as one range (its own size) and its one job.
    private func planOneRange(_ file: RepoFile, of request: SpoolRequest, claimed: Set<String>?) {
        let planned = PlannedFile(repo: request.repo, modelDir: request.modelDir, commit: request.commit, file: file,
                                  rangeSize: file.size, node: request.node, layout: request.layout, endpoint: request.endpoint)
        if (try? spool.plan(planned, pending: [0], claimed: claimed)) != nil { metrics?.planned(1) }
    }

    /// Recreates jobs that got lost (a planner or splicer that died half way): a range of a
    /// planned file that is not done, not ready, not claimed and has no part.
    /// Returns true when some range looks lost but awaits its second look (the caller looks again soon).
    @discardableResult
    public func repairLostJobs() -> Bool {
        var pending = false
        // A plan is repaired by its requester's node while that node's supervisor serves (one
        // node, not every node, looks at its jobs); by any node once it is gone.
        let round = spool.leaseRound()
        var served: [String: Bool] = [:]
        // `jobs/ready` and `jobs/claimed` are listed once per repair, not once per plan (a
        // listing per plan grew with the plans times the jobs: quadratic in a repo's files), ready
        // before claimed, and each plan's parts and sidecar looked at after both.
        var readyListing: Set<String>??
        var claimedListing: Set<String>??
        for plan in spool.plannedFiles() {
            if plan.node != spool.owner.node {
                let serving = served[plan.node] ?? spool.supervisorServes(plan.node, round: round)
                served[plan.node] = serving
                if serving { continue }
            }
            // This look's verdicts replace the last one's, whatever this look decides.
            let previous = suspects.replace(plan.key, with: [])
            let directory = plan.directory
            if directory.isComplete(plan.file) { spool.dropPlan(plan); continue }
            // Look in the order a job moves (ready, claimed, part, done), so a job that moves
            // while we look is seen at a later stage, never missed. A range is lost only when
            // every look succeeded and found nothing: an unreadable directory, part or sidecar
            // may hold it.
            if readyListing == nil { readyListing = .some(spool.lookReadyJobs().map(Set.init)) }
            guard let ready = readyListing ?? nil else { continue }
            let unready = (0..<plan.rangeCount).filter { !ready.contains(plan.jobName($0)) }
            guard !unready.isEmpty else { continue }
            if claimedListing == nil { claimedListing = .some(spool.claimedJobs()) }
            guard let claimedJobs = claimedListing ?? nil else { continue }
            let candidates = unready.filter { !claimedJobs.contains(plan.jobName($0)) && spool.hasPart(plan, $0) == false }
            guard !candidates.isEmpty else { continue }
            let record: Sidecar?
            switch Sidecar.look(plan.file.path, in: directory) {
            case .found(let found): record = found
            case .absent:
                // Finalizing unlinks the sidecar after the rename into place: look again.
                if directory.isComplete(plan.file) { spool.dropPlan(plan); continue }
                record = nil
            case .unknown: continue
            }
            // A sidecar of another commit or range size says nothing about this plan's ranges.
            // A Xet job's sidecar records terms, not ranges: its one job is done only when the file is final.
            let done = plan.kind == .xet ? []
                : record.map { $0.commit == plan.commit && $0.rangeSize == plan.rangeSize ? Set($0.done) : [] } ?? []
            if candidates.count == plan.rangeCount && done.count == plan.rangeCount {
                // Every range done and none queued, claimed or in a part: a splicer stopped between
                // its sidecar write and the file's check (killed, or a repair's last range was
                // judged). Finish it: the splice checks the file under its staging lock.
                Splicer(spool: spool).splice(plan)
                continue
            }
            // Lost only when two looks a repair interval apart both found nothing: a look can read
            // a sidecar older than the part's removal on a network filesystem's client. A range
            // beyond the job window was never published: only the first ones that fit beside the
            // ranges in flight are suspects (JobWindow).
            let waiting = Set(candidates)
            let flying = (0..<plan.rangeCount).filter { !waiting.contains($0) && !done.contains($0) }.count
            let lost = Set(JobWindow.fitting(candidates.filter { !done.contains($0) }, inFlight: flying))
            _ = suspects.replace(plan.key, with: lost)
            let confirmed = previous.intersection(lost)
            if !confirmed.isEmpty { spool.addJobs(plan, indices: confirmed.sorted(), givenBack: true) }
            if confirmed.count < lost.count { pending = true }
        }
        return pending
    }
}

/// Ranges found lost at the last repair, per file key.
final class LostRanges: @unchecked Sendable {
    private let lock = NSLock()
    private var byKey: [String: Set<Int>] = [:]

    /// Records this look's lost ranges and returns the previous look's.
    func replace(_ key: String, with lost: Set<Int>) -> Set<Int> {
        lock.withLock {
            let previous = byKey[key] ?? []
            byKey[key] = lost.isEmpty ? nil : lost
            return previous
        }
    }
}
