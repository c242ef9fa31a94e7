// InHandFinish - a file of one range finished by the worker that fetched it: its part, still in
// `tmp/` and never published, is copied into the staging file, checked and renamed into place
// under the staging lock, then the claim and the plan go (docs/protocol.md, "Steps", finish in
// hand). No part is synced or linked, and no splicer has to find it.
import Foundation
import ModelCache

/// What finishing a fetched one-range file in hand came to.
public enum InHandFinish: Sendable, Equatable {
    /// Verified and renamed into place, or found final already: the claim, the part and the plan are gone.
    case finalized
    /// Not finished here (not a file of one range; its staging lock held by another live process;
    /// under repair; its target or staging file not opened now): the part is published as any
    /// part, for a splicer; nothing was taken from it.
    case publish
    /// The bytes did not verify, or the file failed: the part and the claim are gone, and the
    /// range is ready again (a one-range file's repair fetches it once more) or the failure is
    /// recorded. The reason, for the log.
    case failed(String)
}

extension Splicer {
    /// Finishes the file of `claim`, a file of one range whose bytes `part` (the claimant's
    /// unpublished part in `tmp/`) holds whole: what a splicer would do with the published part,
    /// done by the fetcher at once. The part needs no sync: the staging file it is copied into is
    /// synced before its rename, and a crash before that leaves the claim, which revocation makes
    /// ready again.
    public func finishInHand(_ claim: ClaimedJob, part: String) -> InHandFinish {
        let plan = claim.plan
        guard plan.rangeCount == 1, plan.kind != .xet, claim.duplicateOf == nil, claim.index == 0 else { return .publish }
        guard case .success(let anchor) = spool.anchor(plan) else { return .publish }
        return withExtendedLifetime(anchor) { finishInHand(claim, part: part, in: anchor.directory, told: anchor.told) }
    }

    private func finishInHand(_ claim: ClaimedJob, part: String, in directory: ModelDirectory,
                              told: (String) -> String) -> InHandFinish {
        let plan = claim.plan
        if !directory.isComplete(plan.file) {
            guard let lock = StagingLock.acquire(plan.file.path, in: directory, owner: spool.owner, lease: spool.lease) else {
                return .publish
            }
            let held = HeldLocks(lease: spool.lease)
            held.add(lock)
            // Released before the claim and plan go and the requests are settled: a waiter told
            // "done" finds no lock of this file left in `.incomplete/`.
            let staged = withExtendedLifetime(held) { finalize(claim, part: part, in: directory, told: told) }
            held.releaseAll()
            if let staged { return staged }
        }
        finished(claim, part: part)
        return .finalized
    }

    /// Under the staging lock: the part copied into a fresh staging file, checked and renamed
    /// into place (nil), or what else came of it.
    private func finalize(_ claim: ClaimedJob, part: String, in directory: ModelDirectory,
                          told: (String) -> String) -> InHandFinish? {
        let plan = claim.plan
        let staging: StagingFile
        do {
            staging = try StagingFile(file: plan.file, in: directory, commit: plan.commit, rangeSize: plan.rangeSize)
            // A file under repair compares its refetched range with the staged bytes: a splicer's work.
            guard staging.rangeCount == 1, !staging.isRepairing else { return .publish }
            try staging.splice(partAt: part, index: 0)
            staging.markDone(0)
        } catch {
            return .publish  // the part, published, is spliced (or judged) by a splicer
        }
        do {
            try staging.finalize()
            return nil
        } catch CacheError.repairing(_, let ranges) {
            // It did not verify: its one range is fetched again and compared (the sidecar says so).
            spool.discardPart(part)
            spool.dropClaim(claim)
            spool.addJobs(plan, indices: ranges)
            return .failed(told("\(plan.file.path) did not verify; its range is fetched again"))
        } catch let error as CacheError where error.isTransient {
            return .publish  // could not look now (a stale handle, EIO): the file is not bad
        } catch {
            spool.discardPart(part)
            spool.recordFailure(plan.key, FailureRecord(FailureKind(error), told("\(error)")))
            spool.dropClaim(claim)
            spool.dropPlan(plan)
            settleRequests()
            return .failed(told("\(error)"))
        }
    }

    /// The file is final: its part, claim and plan go, and its requests are settled. The claim
    /// goes before the plan, as after a splice: a worker killed between the two leaves a plan
    /// whose range the repair of lost jobs makes ready again, and its next claimant finds the
    /// file final and drops the plan; a claim left without its plan would be revoked into a
    /// ready job no plan explains.
    private func finished(_ claim: ClaimedJob, part: String) {
        spool.discardPart(part)
        spool.dropClaim(claim)
        spool.dropPlan(claim.plan)
        settleRequests()
    }
}
