// InHandFinish - a file of one range fetched and finished by the worker that claimed it: under
// the file's staging lock its bytes go straight into a fresh staging file, which is checked and
// renamed into place; then the claim and the plan go (docs/protocol.md, "Steps", finish in hand).
// No part is made, synced or published, and no splicer has to find one.
import Foundation
import ModelCache

/// What finishing a fetched one-range file in hand came to.
public enum InHandFinish: Sendable, Equatable {
    /// Verified and renamed into place, or found final already: the claim and the plan are gone.
    case finalized
    /// Not finished: the reason, for the log. The bytes did not verify (the file's repair fetches
    /// its range again), the file failed (recorded), or it could not be looked at now (the range
    /// is given back).
    case failed(String)
}

/// A file of one range staged for the worker that claimed it: its staging lock held (refreshed
/// on the process's timer), its staging file made afresh, its model directory held open.
public final class InHandStaging: @unchecked Sendable {
    public let claim: ClaimedJob
    /// Where the fetch writes the file's bytes: the staging file, through the opened directory.
    public var path: String { staging.dataURL.path }
    let staging: StagingFile
    let anchor: TargetAnchor
    private let held: HeldLocks
    private let lock = NSLock()
    private var released = false

    init(claim: ClaimedJob, staging: StagingFile, anchor: TargetAnchor, held: HeldLocks) {
        self.claim = claim
        self.staging = staging
        self.anchor = anchor
        self.held = held
    }

    /// Gives the staging lock up (once; the staging file stays for whoever takes the file next).
    public func release() {
        let first = lock.withLock { () -> Bool in
            defer { released = true }
            return !released
        }
        if first { held.releaseAll() }
    }

    deinit { release() }
}

extension Splicer {
    /// Stages the file of `claim` for its claimant to fetch in hand: a file of one range (not a
    /// Xet job, not an endgame duplicate) not final yet, whose staging lock no other live process
    /// holds and which is not under repair (a refetched range is compared with the staged bytes,
    /// a splicer's work). nil: the range is fetched into a part, as any range.
    public func stageInHand(_ claim: ClaimedJob) -> InHandStaging? {
        let plan = claim.plan
        guard plan.rangeCount == 1, plan.kind != .xet, claim.duplicateOf == nil, claim.index == 0,
              case .success(let anchor) = spool.anchor(plan) else { return nil }
        let directory = anchor.directory
        guard !directory.isComplete(plan.file),
              let lock = StagingLock.acquire(plan.file.path, in: directory, owner: spool.owner, lease: spool.lease) else { return nil }
        let held = HeldLocks(lease: spool.lease)
        held.add(lock)
        guard let staging = try? StagingFile(file: plan.file, in: directory, commit: plan.commit, rangeSize: plan.rangeSize),
              staging.rangeCount == 1, !staging.isRepairing else {
            held.releaseAll()
            return nil
        }
        return InHandStaging(claim: claim, staging: staging, anchor: anchor, held: held)
    }

    /// Finishes a file whose one range was fetched whole into its staging file: checked and
    /// renamed into place (synced first), the lock given up, then the claim and the plan dropped
    /// and the requests settled.
    public func finishInHand(_ staged: InHandStaging) -> InHandFinish {
        let claim = staged.claim
        let plan = claim.plan
        let told = staged.anchor.told
        let staging = staged.staging
        staging.markDone(0)
        do {
            try staging.finalize()
        } catch CacheError.repairing(_, let ranges) {
            // It did not verify: its one range is fetched again and compared (the sidecar says so).
            staged.release()
            spool.dropClaim(claim)
            spool.addJobs(plan, indices: ranges)
            return .failed(told("\(plan.file.path) did not verify; its range is fetched again"))
        } catch let error as CacheError where error.isTransient {
            // Could not look now (a stale handle, EIO): the file is not bad; the range goes back.
            staged.release()
            spool.unclaim(claim)
            return .failed(told("\(error); the range is given back"))
        } catch {
            staged.release()
            spool.recordFailure(plan.key, FailureRecord(FailureKind(error), told("\(error)")))
            spool.dropClaim(claim)
            spool.dropPlan(plan)
            settleRequests()
            return .failed(told("\(error)"))
        }
        // Released before the claim and plan go and the requests are settled: a waiter told
        // "done" finds no lock of this file left in `.incomplete/`.
        staged.release()
        // The claim before the plan, as after a splice: a worker killed between the two leaves a
        // plan that the repair of lost jobs drops on finding the file final; a claim left without
        // its plan would be revoked into a ready job no plan explains.
        spool.dropClaim(claim)
        spool.dropPlan(plan)
        // Another node's request is settled by that node while it serves: the generation tells it
        // a file of it is final (a part published would have woken its splicer; this wakes its
        // next pass, which settles), instead of its settle every quarter lease.
        if plan.node != spool.owner.node { spool.bumpGeneration() }
        // Only the requests for this model directory and commit can have become done, and they
        // are looked at through the directory already open (an open of the model directory's
        // path, folder by folder, per small file was most of a worker's opens).
        let noFailures = spool.hasNoFailures()
        for request in spool.activeRequests(skipping: spool.servedElsewhere)
        where request.modelDir == plan.modelDir && request.commit == plan.commit && spool.targets?.cachedRefusal(request) == nil {
            settle(request, in: staged.anchor.directory, noFailures: noFailures)
        }
        return .finalized
    }
}
