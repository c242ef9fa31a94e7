// XetJob - a Xet-backed file under the daemon: planned as one job of its own kind (the plan's
// `kind: xet`), claimed like a range job, and run by its claimant as the embedded engine's native
// Xet fetch of that file into its staging file, under its staging lock (docs/xet.md, "Under the
// daemon").
//
// The worker asks the CAS with its own node's credential: the spool holds the plan (repo, commit,
// file, its Xet hash) and never a token or a pre-signed xorb URL. Terms written are recorded in
// the staging file's sidecar as the embedded engine records them, so a claimant killed mid-file
// leaves a record the next claimant (after the lease judge revokes the claim) resumes from. The
// chunk index of the spool's cache base serves chunks a final file already holds, and the file
// is published into it once verified. A file whose bytes fail the Merkle root or the SHA-256
// twice (the second fetch fresh from the CAS) fails the request naming it; nothing is put in place.
import Foundation
import HubClient
import HubTypes
import ModelCache
import SharedFiles
import Spool
import Transfer

/// One claimed Xet job, run to its end by the slot that claimed it.
struct XetJob {
    let claim: ClaimedJob
    let spool: Spool
    let settings: DownloadSettings
    let log: @Sendable (String) -> Void

    /// Fetches, verifies and finalizes the claim's file with `client` (the node's credential for
    /// its own Hub, none for another allowed one); `entry` shows its bytes to this node's waiters.
    func run(client: HubClient, entry: LiveProgress.Entry?, shouldStop: @escaping @Sendable () -> Bool) {
        let plan = claim.plan
        if claim.duplicateOf != nil {
            // Never raced: two claimants of one file would wait on one staging lock.
            spool.dropClaim(claim)
            return
        }
        // Written through the model directory opened by its judged path, following no link
        // (TargetAnchor), as the planner and splicer write: a folder swapped for a link since is
        // refused, not followed.
        let anchor: TargetAnchor
        switch spool.anchor(plan) {
        case .success(let opened):
            anchor = opened
        case .failure(let refusal) where refusal.transient:
            spool.unclaim(claim)  // could not open it now: not a verdict on the target
            Sleep.seconds(2, unless: shouldStop)
            return
        case .failure(let refusal):
            fail(reason: refusal.failure)
            return
        }
        withExtendedLifetime(anchor) { fetch(into: anchor, client: client, entry: entry, shouldStop: shouldStop) }
    }

    private func fetch(into anchor: TargetAnchor, client: HubClient, entry: LiveProgress.Entry?,
                       shouldStop: @escaping @Sendable () -> Bool) {
        let plan = claim.plan
        let revoked = ClaimRevocation()
        // The claim's lease is refreshed on a timer, not as bytes arrive: the fetch may wait on a
        // staging lock another process holds, or on a reconstruction's retries, with no byte.
        let refresher = Thread { [spool, claim, lease = settings.lease] in
            while !revoked.isSet && !revoked.isFinished {
                Sleep.seconds(LeaseJudge.refreshInterval(lease: lease), unless: { revoked.isFinished })
                if revoked.isFinished { break }
                if !spool.refresh(claim) { revoked.set() }
            }
        }
        refresher.start()
        defer { revoked.finish() }
        do {
            let repo = try RepoID(plan.repo)
            var xetSettings = settings
            xetSettings.xet = true  // the request asked for the native path (its plan's kind)
            xetSettings.maxRate = nil  // a caller's cap is not the node's
            let engine = TransferEngine(client: client, settings: xetSettings, xetChunkIndex: XetChunkIndex(base: cacheBase),
                                        cap: try nodeCap())
            // The chunk index names the final file by its real path, which every process can open.
            let indexed = ModelDirectory.at(anchor.realPath, layout: plan.layout ?? .native, commit: plan.commit)
            try engine.fetch([plan.file], repo: repo, commit: plan.commit, into: anchor.directory, indexedAs: indexed,
                             progress: { entry?.update($0.completedBytes) },
                             isCancelled: { revoked.isSet || shouldStop() })
            revoked.finish()
            log("\(plan.repo)/\(plan.file.path): fetched natively from the Xet CAS and verified")
            spool.dropPlan(plan)
            spool.dropClaim(claim)
            Splicer(spool: spool).settleRequests()
        } catch is CancellationError {
            revoked.finish()
            // Revoked: another claimant has the file now (the staging lock keeps them apart).
            // Stopping: the claim goes back; the sidecar's terms stay for the next claimant.
            if !revoked.isSet { spool.unclaim(claim) }
        } catch let error as CacheError where DiskSpace.isFull(error) {
            // A full disk is not a pause: the request fails saying what is needed.
            fail(reason: FailureRecord(FailureKind(fetching: error), anchor.told("\(error)")))
        } catch let error as CacheError {
            // A local problem (I/O, a lock that cannot be taken now): the file is not at fault.
            revoked.finish()
            log("\(plan.repo)/\(plan.file.path): \(anchor.told("\(error)")); giving the Xet job back")
            spool.unclaim(claim)
            Sleep.seconds(2, unless: shouldStop)
        } catch {
            fail(reason: FailureRecord(FailureKind(fetching: error), anchor.told("\(error)")))
        }
    }

    /// The file cannot be fetched (its bytes failed twice, the CAS refuses it, the disk is
    /// full, its target is refused): the request fails naming it; what is staged stays or went
    /// as the engine decided.
    private func fail(reason failure: FailureRecord) {
        let plan = claim.plan
        log("\(plan.repo)/\(plan.file.path): \(failure.reason)")
        spool.recordFailure(plan.key, failure)
        spool.dropClaim(claim)
        spool.dropPlan(plan)
        Splicer(spool: spool).settleRequests()
    }

    /// The cache base the spool lives in (`<base>/spool`): its chunk index serves every request.
    private var cacheBase: URL { URL(fileURLWithPath: spool.root).deletingLastPathComponent() }

    /// The node's bandwidth cap (`speech-fetchd --max-rate`), the schedule every worker charges.
    private func nodeCap() throws -> RateCap? {
        guard let rate = settings.nodeMaxRate, let schedule = settings.nodeRateSchedule else { return nil }
        return try RateCap(bytesPerSecond: rate, schedule: schedule)
    }
}

extension Planner {
    /// Plans `file` of `request` as one Xet job (under its staging lock, taken by the caller):
    /// no staging file is made here; the claimant's engine makes or resumes it.
    func planXet(_ file: RepoFile, of request: SpoolRequest) {
        let planned = PlannedFile(repo: request.repo, modelDir: request.modelDir, commit: request.commit, file: file,
                                  rangeSize: file.size, node: request.node, layout: request.layout,
                                  endpoint: request.endpoint, kind: .xet)
        if (try? spool.plan(planned, pending: [0])) != nil { metrics?.planned(1) }
    }
}

/// Whether a Xet job's claim was revoked (its lease refresh found it gone), and whether the job
/// ended (its refresher stops).
final class ClaimRevocation: @unchecked Sendable {
    private let lock = NSLock()
    private var revoked = false
    private var finished = false
    var isSet: Bool { lock.withLock { revoked } }
    var isFinished: Bool { lock.withLock { finished } }
    func set() { lock.withLock { revoked = true } }
    func finish() { lock.withLock { finished = true } }
}

extension Worker {
    /// A claimed Xet job, run on this slot's thread (Worker's dispatch on the plan's kind).
    func workXet(_ claim: ClaimedJob, fetcher: SlotFetchers, shouldStop: @escaping @Sendable () -> Bool) {
        let entry = live?.begin(job: claim.plan.jobName(claim.index))
        defer { entry?.remove() }
        let client: HubClient
        do {
            client = try fetcher.fetcher(for: claim.plan.endpoint).client
        } catch {
            log("\(claim.plan.repo)/\(claim.plan.file.path): \(error)")
            spool.recordFailure(claim.plan.key, FailureRecord(FailureKind(fetching: error), "\(error)"))
            spool.dropClaim(claim)
            spool.dropPlan(claim.plan)
            Splicer(spool: spool).settleRequests()
            return
        }
        XetJob(claim: claim, spool: spool, settings: settings, log: log).run(client: client, entry: entry, shouldStop: shouldStop)
    }
}
