// SpoolSweep - what a supervisor takes back from the gone: claims whose lease expired made ready
// again, an endgame duplicate's stale marker dropped, and temp files whose writer is gone removed
// (docs/protocol.md, "Liveness").
import Foundation
import SharedFiles

extension Spool {
    /// Moves claims of dead local processes, and claims not refreshed within the lease (on the
    /// file server's clock; a live but silent worker too), back to ready. Claims whose part was
    /// published are just dropped.
    /// Returns the revoked job names. Only what was read decides: a claim whose mtime, or the
    /// server's clock, cannot be read is not judged by age; one whose part cannot be looked up
    /// is left for the next pass.
    @discardableResult
    public func revokeExpiredClaims() -> [String] {
        var revoked: [String] = []
        guard let entries = SharedFS.names(layout.path(.claimed)) else { return [] }
        let round = leaseRound()
        // Another node's claims are its own supervisor's to judge while that supervisor lives
        // (it revokes a dead or silent worker of its node): one look at each node's heartbeat,
        // not one at each of its claims, so a pass costs the same whatever the claims in flight.
        var nodeServed: [String: Bool] = [:]
        for entry in entries {
            guard let claim = SpoolLayout.Claim(entry) else { continue }
            let job = claim.job
            let path = layout.path(.claimed, entry)
            let node = claim.holder.node
            if node != owner.node {
                let served = nodeServed[node] ?? supervisorServes(node, round: round)
                nodeServed[node] = served
                if served { continue }
            }
            guard round.liveness(of: path, holder: claim.holder) == .expired else { continue }
            switch SharedFS.exists(layout.part(job)) {
            case true?:
                unlink(path)
            case false?:
                Spool.markGivenBack(path)  // its claimant may have left a part in tmp/ to adopt
                if rename(path, layout.ready(job)) == 0 { revoked.append(job) }
            case nil:
                continue
            }
        }
        // Endgame markers of duplicates that stopped refreshing (their worker died): another
        // idle slot may race the claim then. Looked at only while claims stand (a marker races one).
        if !entries.isEmpty, let markers = SharedFS.names(layout.path(.endgame)) {
            for marker in markers {
                let path = layout.endgameMarker(marker)
                if round.liveness(of: path, holder: nil) == .expired { unlink(path) }
            }
        }
        if !revoked.isEmpty { bumpGeneration() }
        return revoked
    }

    /// How often a process judges other nodes' temp files: they are kept 36 hours, so a look
    /// every 10 minutes is as good as one per sweep; a sweep every 10 s while busy looked at the
    /// heartbeat of every node with a file in `tmp/` (in a herd every node has, so every node's
    /// sweep cost a lookup per node: the nodes squared).
    static let foreignSweepInterval = 600.0

    /// Removes temp files whose writer is gone: a dead local process at once, a foreign node's
    /// after 36 hours (as maildir sweeps tmp/), judged at most every `foreignSweepInterval`.
    /// Returns how many were removed.
    @discardableResult
    public func sweepTemp() -> Int {
        var removed = 0
        let round = leaseRound()
        let keep = 36 * 3600.0
        let now = Date()
        let judgesForeign = lock.withLock {
            guard now.timeIntervalSince(lastForeignSweep) >= Spool.foreignSweepInterval else { return false }
            lastForeignSweep = now
            return true
        }
        for name in SharedFS.names(layout.path(.tmp)) ?? [] {
            guard let temp = SpoolLayout.Temp(name) else { continue }
            // Another node's temp files are its own supervisor's to sweep while it serves (one
            // look at its heartbeat per quarter lease, not a stat of each of its files).
            if temp.node != owner.node && (!judgesForeign || supervisorServes(temp.node, round: round)) { continue }
            let path = layout.path(.tmp, name)
            // A local writer while its pid runs, another node's for 36 hours.
            var stale = round.liveness(of: path, holder: LockOwner(node: temp.node, pid: temp.pid), lease: keep,
                                       localByPid: true) == .expired
            // A dead worker's part waits for the next claimant of its range to adopt it (36 hours
            // at most); whether the job is ready must be read, not guessed.
            if stale, let job = temp.partJob, temp.node == owner.node {
                switch SharedFS.exists(layout.ready(job)) {
                case true?: stale = round.liveness(of: path, holder: nil, lease: keep) == .expired
                case false?: break
                case nil: stale = false
                }
            }
            if stale, unlink(path) == 0 { removed += 1 }
        }
        return removed
    }
}
