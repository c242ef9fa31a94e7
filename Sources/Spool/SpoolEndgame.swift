// SpoolEndgame - what an idle slot looks at once nothing is ready: the claim of another node far
// behind (`endgameLook`), raced by one duplicate; and every node's claims by the share of their
// ranges still to come, what a slot's fair share is judged by (`ClaimPolicy`; docs/cluster.md,
// "Endgame").
import Foundation
import ModelCache
import SharedFiles

extension Spool {
    /// The claim of another node with the most bytes left, when that is more than half its range,
    /// its node holds more claims than this one, no one duplicates it yet, and a duplicate would
    /// end first: by the bytes still to cross each link (`ClaimPolicy.duplicateWouldWin`), or
    /// because the claim has not grown for `stalledAfter` seconds of this process's looks (a
    /// stalled holder).
    /// What an idle slot may fetch too once nothing is ready.
    public func laggingClaim(stalledAfter: Double = 2) -> LaggingClaim? { endgameLook(stalledAfter: stalledAfter).lagging }

    /// `laggingClaim`, and whether another node holds claims at all (while one does, an idle slot
    /// looks again after a while: a claim may stall; once none does, it sleeps until woken).
    /// `holders`: the nodes holding claims. With `lookFurther` false (this node is not one of the
    /// few that race: `EndgameLookers`) the look ends at the claims' listing.
    public func endgameLook(stalledAfter: Double = 2, lookFurther: (Set<String>) -> Bool = { _ in true })
        -> (lagging: LaggingClaim?, othersHoldClaims: Bool, mine: Int, holders: Set<String>) {
        guard let claims = self.claims(), !claims.isEmpty else { return (nil, false, 0, []) }
        let holders = Set(claims.map(\.holder.node))
        let others = claims.contains { $0.holder.node != owner.node }
        let held = claims.filter { $0.holder.node == owner.node }.count
        guard others else {
            growth.forget(except: [])
            return (nil, false, held, holders)
        }
        guard lookFurther(holders) else { return (nil, true, held, holders) }
        var perNode: [String: Int] = [:]
        for claim in claims { perNode[claim.holder.node, default: 0] += 1 }
        let mine = perNode[owner.node] ?? 0
        // Only a node holding more claims than this one is raced (below): when none does, the
        // claims' listing has said it all, and `endgame/`, `tmp/` and every claim's part are not
        // looked at (in a herd every node holds its even share: each holder's look was a listing
        // of three folders and a stat of every claim's part, on every wake-up).
        guard perNode.contains(where: { $0.key != owner.node && $0.value > mine }) else { return (nil, true, held, holders) }
        guard let raced = SharedFS.names(layout.path(.endgame)).map(Set.init),
              let temps = SharedFS.names(layout.path(.tmp)) else { return (nil, true, held, holders) }
        // Bytes still to come of each node's ranges in flight: its claims, and this node's
        // duplicates (its temp parts of raced jobs it holds no claim of).
        var inFlight: [String: [Int64]] = [:]
        var lengths: [String: Int64] = [:]
        var candidates: [(claim: SpoolLayout.Claim, length: Int64, remaining: Int64)] = []
        var plans: [String: PlannedFile?] = [:]  // one read per file, not one per claim
        for claim in claims {
            guard let (key, index) = claim.range else { continue }
            if plans[key] == nil { plans[key] = .some(plannedFile(key)) }
            guard let plan = plans[key] ?? nil, index < plan.rangeCount else { continue }
            let range = plan.range(index)
            let length = range.end - range.start + 1
            lengths[claim.job] = length
            let remaining = max(0, length - written(by: claim, temps: temps))
            inFlight[claim.holder.node, default: []].append(remaining)
            candidates.append((claim, length, remaining))
        }
        let myClaims = Set(claims.filter { $0.holder.node == owner.node }.map(\.job))
        for name in temps {
            guard let temp = SpoolLayout.Temp(name), temp.node == owner.node, let job = temp.partJob,
                  raced.contains(job), !myClaims.contains(job), let length = lengths[job],
                  case .found(let st) = SharedFS.lstat(layout.path(.tmp, name)) else { continue }
            inFlight[owner.node, default: []].append(max(0, length - Int64(st.st_size)))
        }
        let now = Date()
        var best: LaggingClaim?
        for (claim, length, remaining) in candidates where claim.holder.node != owner.node && !raced.contains(claim.job) {
            // Stalled only once some of its bytes were seen (a client that cannot see another's
            // writes before close sees every claim at 0).
            let unchanged = growth.stalled(claim.name, remaining: remaining, now: now, after: stalledAfter)
            let stalled = unchanged && remaining < length
            // A claim with no byte seen yet may simply not have begun: when a job starts on every
            // node at once, the nodes left without a claim saw every range just claimed, at 0
            // bytes, and raced the holders of two (a duplicate each, 1.09x the file from the
            // Hub at 30 nodes). It is judged by the links only once it has stood at 0 for
            // `stalledAfter` of this process's looks.
            let begun = remaining < length || unchanged
            guard (perNode[claim.holder.node] ?? 0) > mine, remaining * 2 > length, remaining > best?.remaining ?? 0 else { continue }
            guard stalled || (begun && ClaimPolicy.duplicateWouldWin(remaining: remaining, length: length,
                                                                    holder: inFlight[claim.holder.node] ?? [], mine: inFlight[owner.node] ?? [])) else { continue }
            best = LaggingClaim(job: claim.job, claimPath: layout.path(.claimed, claim.name), node: claim.holder.node,
                                remaining: remaining)
        }
        growth.forget(except: Set(claims.map(\.name)))
        return (best, true, held, holders)
    }

    /// Bytes a claim's holder has written so far: its temp part (`tmp/part-<job>@<node>@<pid>@n`)
    /// grows as they arrive. 0 when it cannot be seen.
    func written(by claim: SpoolLayout.Claim, temps: [String]) -> Int64 {
        var written: Int64 = 0
        for name in temps {
            guard let temp = SpoolLayout.Temp(name), temp.partJob == claim.job, temp.node == claim.holder.node,
                  temp.pid == claim.holder.pid else { continue }
            if case .found(let st) = SharedFS.lstat(layout.path(.tmp, name)) { written = max(written, Int64(st.st_size)) }
        }
        return written
    }

    /// Every node's claims, each as the share of its range still to come (1: nothing written
    /// yet), by node; nil when the claims cannot be listed. `rangeLength` gives a job's length
    /// (nil: unknown, counted as a whole range).
    public func claimLoads(rangeLength: (String) -> Int64?) -> [String: [Double]]? {
        claims().map { claimLoads($0, rangeLength: rangeLength) }
    }

    /// `claimLoads` of claims listed already.
    public func claimLoads(_ claims: [SpoolLayout.Claim], rangeLength: (String) -> Int64?) -> [String: [Double]] {
        let temps = SharedFS.names(layout.path(.tmp)) ?? []
        var loads: [String: [Double]] = [:]
        for claim in claims {
            var left = 1.0
            if let length = rangeLength(claim.job), length > 0 {
                left = max(0, 1 - Double(written(by: claim, temps: temps)) / Double(length))
            }
            loads[claim.holder.node, default: []].append(left)
        }
        return loads
    }

    /// Takes the one endgame duplicate of a lagging claim (`jobs/endgame/<job>`, created once with
    /// link(2)); nil when someone else races it already or the claim is gone.
    public func duplicate(_ lagging: LaggingClaim) -> ClaimedJob? {
        // A Xet job is never raced: it is the whole file, staged under one lock.
        guard let (key, index) = PlannedFile.parseJob(lagging.job), let plan = plannedFile(key), plan.kind != .xet else { return nil }
        let marker = layout.endgameMarker(lagging.job)
        let temp = tempPath("endgame")
        guard (try? SpoolFS.writeNew(temp, Data(owner.description.utf8))) != nil,
              (try? SpoolFS.publishOnce(temp, as: marker)) == true else { return nil }
        // The claim may have been published between the look and the marker.
        guard SharedFS.exists(lagging.claimPath) == true, hasPart(plan, index) == false else {
            unlink(marker)
            return nil
        }
        return ClaimedJob(name: lagging.job, path: marker, plan: plan, index: index, duplicateOf: lagging.claimPath)
    }

    /// True when the range a duplicate races was published (by anyone) or its claim is gone:
    /// the duplicate stops.
    public func duplicateIsMoot(_ claim: ClaimedJob) -> Bool {
        guard let raced = claim.duplicateOf else { return false }
        return hasPart(claim.plan, claim.index) == true || SharedFS.exists(raced) == false
    }

    /// The claims of each node as whole ranges (a listing only): the share by count.
    public func claimCounts() -> [String: [Double]]? {
        claims().map(Spool.claimCounts)
    }

    /// The claims of each node as whole ranges, from claims listed already.
    public static func claimCounts(_ claims: [SpoolLayout.Claim]) -> [String: [Double]] {
        var loads: [String: [Double]] = [:]
        for claim in claims { loads[claim.holder.node, default: []].append(1) }
        return loads
    }
}

/// The bytes still to come of the claims this process looked at, and since when they have not
/// changed: a claim that does not grow between looks for some seconds is stalled.
final class ClaimGrowth: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [String: (remaining: Int64, since: Date)] = [:]

    func stalled(_ claim: String, remaining: Int64, now: Date, after seconds: Double) -> Bool {
        lock.withLock {
            if let last = seen[claim], last.remaining == remaining { return now.timeIntervalSince(last.since) >= seconds }
            seen[claim] = (remaining, now)
            return false
        }
    }

    func forget(except live: Set<String>) {
        lock.withLock { seen = seen.filter { live.contains($0.key) } }
    }
}
