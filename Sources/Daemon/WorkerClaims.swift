// WorkerClaims - how a worker's slot picks its next range: one listing of `jobs/ready` per
// wake-up for the process, each file's plan read once per scan, every process starting its scan
// at its own place, and the node's fair share (`ClaimPolicy.mayClaim`) looked at once a claimable
// job is found.
import Foundation
import ModelCache
import SharedFiles
import Spool

extension Worker {
    /// The lowest ready range this node may take now, claimed; nil when there is none. Lowest
    /// first: the file's contiguous prefix grows steadily, so the splicer's hash keeps up and
    /// little is left to hash when the last range lands. Fair share: a node holds at most its
    /// share of the outstanding ranges (ready and claimed, over the live nodes), so the first
    /// node to wake does not take them all. The slots of this machine decide one at a time
    /// (`ReadyView.oneClaimAtATime`); the slots woken by one wake-up list `jobs/ready` once
    /// between them, unless a look claimed.
    func claimNext(ticket: Int, afterWork: Bool) -> ClaimedJob? {
        claimLock.withLock {
            guard looks.shouldList(ticket: ticket, afterWork: afterWork) else { return nil }
            let claim = readyView.map { $0.oneClaimAtATime { claimLowest() } } ?? claimLowest()
            looks.listed(ticket: ticket, claimed: claim != nil)
            return claim
        }
    }

    /// Jobs tried from one listing before listing again: when the first few were taken by
    /// others since the listing, the rest likely were too, and a listing (three operations at
    /// the file server) costs less than a failed try at each (a lookup of a name that is gone).
    static let triesPerListing = 4

    private func claimLowest() -> ClaimedJob? {
        for attempt in 0..<3 {
            // The machine's shared listing first; after its first jobs were all taken, a fresh one.
            switch claimFromOneListing(fresh: attempt > 0) {
            case .claimed(let claim): return claim
            case .none: return nil
            case .taken: continue
            }
        }
        return nil
    }

    private enum ScanResult {
        case claimed(ClaimedJob)
        case none
        /// The jobs tried were all taken by others since the listing.
        case taken
    }

    /// `jobs/ready`, sorted: this machine's shared listing while no wake-up has made it stale
    /// (ReadyView: the jobs a scan tries first, and the count of all), else listed now and shared.
    private func readyJobs(fresh: Bool) -> (names: [String], count: Int, epoch: UInt64?) {
        let epoch = readyView?.epoch()
        if !fresh, let epoch, let view = readyView {
            let listing = view.listing(at: epoch) { spool.lookReadyJobs() }
            return (listing?.names ?? [], listing?.count ?? 0, epoch)
        }
        let names = spool.readyJobs()
        if let epoch { readyView?.store(names, at: epoch) }
        return (names, names.count, epoch)
    }

    private func claimFromOneListing(fresh: Bool) -> ScanResult {
        let (ready, count, epoch) = readyJobs(fresh: fresh)
        guard !ready.isEmpty else { return .none }
        // The share is looked at (a listing of the claims) once a job whose plan is published
        // is found: jobs arriving before their plan cost no look at the claims.
        var shareChecked = false
        // A file's jobs are claimable once its plan is published, after its jobs: one look for
        // each file's plan per scan, not one per job (16 slots reading the missing plan for every
        // job they saw slowed the planner publishing a 1 GiB file's 128 jobs). Looked up afresh
        // each scan: a file dropped and asked for again keeps its key but may be planned anew
        // (another node's request, another range size).
        var plans: [String: PlannedFile] = [:]
        var unplanned = Set<String>()
        var tried = 0
        for name in Worker.claimOrder(ready, from: scanStart, node: settings.node, nodes: liveNodeNames()) {
            guard let (key, _) = PlannedFile.parseJob(name), !unplanned.contains(key) else { continue }
            guard let plan = plans[key] ?? spool.plannedFile(key) else {
                unplanned.insert(key)
                continue
            }
            plans[key] = plan
            if ownRequestsOnly && plan.node != settings.node { continue }
            if !shareChecked {
                guard withinShare(ready: count, epoch: epoch) else { return .none }
                shareChecked = true
            }
            if let claim = spool.claim(name, plan: plan) {
                if let epoch { readyView?.taken(name, at: epoch) }
                return .claimed(claim)
            }
            tried += 1
            if tried >= Worker.triesPerListing { return .taken }
        }
        // The machine's listing keeps only the first jobs a scan tries (ReadyView): when none of
        // them could be taken while it counted more, the others are looked for in a listing of all.
        return count > ready.count ? .taken : .none
    }


    /// The order a scan tries `ready` (sorted) in: every file's first range before any later
    /// range, each group in `scanOrder`. A small file is one range, so its job is taken before the
    /// next range of a big file whatever their keys: the small files a loader reads first are not
    /// left waiting behind a big file's ranges; a big file still fills its prefix first.
    ///
    /// Among the live `nodes`, the jobs this `node` would win a draw for come first, then those
    /// it would come second in, and so on (`drawPlaces`; within a place, in the scan's order):
    /// nodes that wake together on one listing (a job that starts on every node at once) take
    /// disjoint jobs first instead of racing for the same ones, each lost race a lookup, a touch
    /// and a rename of a name that is gone at the file server.
    static func claimOrder(_ ready: [String], from start: Int, node: String = "", nodes: [String] = [],
                           window: Int = 64) -> [String] {
        let firstSuffix = PlannedFile.jobName(key: "", index: 0)
        var firsts: [String] = []
        var later: [String] = []
        for name in ready {
            if name.hasSuffix(firstSuffix) { firsts.append(name) } else { later.append(name) }
        }
        let order = scanOrder(firsts, from: start, window: window) + scanOrder(later, from: start, window: window)
        guard nodes.count > 1, nodes.contains(node) else { return order }
        // The jobs a scan tries first: the lowest of each group (the file's prefix still fills first).
        let head = Array(order.prefix(window))
        let places = drawPlaces(of: node, jobs: head, among: nodes)
        let ranked = head.indices.sorted { (places[$0], $0) < (places[$1], $1) }.map { head[$0] }
        return ranked + order.dropFirst(window)
    }

    /// For each job, how many of `nodes` beat `node` in a draw for it: the highest score of
    /// (node, job) wins (rendezvous hashing; 0: this node wins). Every node computes it alike, so
    /// each job has one winner while the nodes agree on who is live, and a job taken leaves the
    /// other jobs' draws as they were.
    static func drawPlaces(of node: String, jobs: [String], among nodes: [String]) -> [Int] {
        let others = nodes.filter { $0 != node }.map { ($0, EndgameLookers.rank($0)) }
        let own = EndgameLookers.rank(node)
        return jobs.map { job in
            let jobRank = EndgameLookers.rank(job)
            let mine = drawScore(own, jobRank)
            return others.reduce(0) { $0 + ((drawScore($1.1, jobRank), $1.0) > (mine, node) ? 1 : 0) }
        }
    }

    /// A node's score for a job: its name's hash and the job's mixed (splitmix64's finalizer): FNV
    /// alone, over names that differ in a few bytes, lets one node win nearly every draw.
    static func drawScore(_ nodeRank: UInt64, _ jobRank: UInt64) -> UInt64 {
        var z = nodeRank ^ jobRank
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// `ready` (sorted) from a start: the lowest `window` jobs are tried first, from `start`
    /// modulo their count and round by a stride, then the rest in order. The window is the lowest jobs the
    /// nodes take at once (16 per node, 64 at least), so the file's prefix still fills first.
    static func scanOrder(_ ready: [String], from start: Int, window: Int = 64) -> [String] {
        let head = min(ready.count, window)
        guard head > 1 else { return ready }
        // A stride of its own too (coprime with the window: every job once), so two processes
        // that start near each other do not then walk the same jobs in step.
        var stride = 1 + (start / 7) % (head - 1)
        while gcd(stride, head) != 1 { stride += 1 }
        let first = start % head
        return (0..<head).map { ready[(first + $0 * stride) % head] } + ready[head...]
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    func liveNodeNames() -> [String] {
        let keep = LeaseJudge.refreshInterval(lease: settings.lease, atLeast: 3)
        if let cached = nodesLock.withLock({ Date().timeIntervalSince(nodesSeen.at) < keep ? nodesSeen.names : nil }) { return cached }
        // A listing of the records, no look at each (that grew with the nodes, in every process),
        // made by one worker process of the machine for all of them.
        let listed = nodeNamesView.map { $0.names(maxAge: keep) { self.spool.supervisorRecordNames() } } ?? spool.supervisorRecordNames()
        let names = listed ?? []
        nodesLock.withLock { nodesSeen = (names, Date()) }
        return names
    }

    private func liveNodes() -> Int { max(1, liveNodeNames().count) }

    /// True while this node is within its share of the outstanding ranges, by count and by the
    /// bytes still to come (`ClaimPolicy.mayClaim`). `epoch`: the wake-up's (ReadyView), whose
    /// count of the claims, once one slot of the machine listed them, serves the others.
    private func withinShare(ready: Int, epoch: UInt64?) -> Bool {
        let nodes = liveNodes()
        // One node's share is every ready range (`ClaimPolicy.mayClaim`): no listing of the claims
        // at each claim (a readdir and a parse of each name, per small file of a large repo).
        if nodes == 1 && ready > 0 { return true }
        // The claims as counted at this wake-up, with this machine's claims since: a herd's
        // slots woke together, and a listing each (16 a node) was the largest per-node cost.
        // The bytes rule below needs every claim's part: it lists afresh.
        if let epoch, let counted = readyView?.claims(at: epoch) {
            guard ClaimPolicy.withinCountShare(counted, ready: ready, liveNodes: nodes) else { return false }
            if counted.mine == 0 || ready >= nodes { return true }
        }
        guard let claims = spool.claims() else { return true }
        // While more ranges are ready than there are nodes, every claim counts as a whole range
        // (a listing of the claims); the bytes each claim still has to come (a listing of tmp/
        // and a look at each part) matter only at the end of a file, and only to a node still
        // within its share by count.
        let counts = Spool.claimCounts(claims)
        if let epoch {
            readyView?.noteClaims(ClaimCount(total: claims.count, mine: counts[settings.node]?.count ?? 0), at: epoch)
        }
        guard ClaimPolicy.withinCountShare(node: settings.node, ready: ready, loads: counts, liveNodes: nodes) else { return false }
        // A node holding no claim is the least loaded whatever the others' bytes (`mayClaim`):
        // the nodes that only wait in a herd look at no part.
        if (counts[settings.node] ?? []).isEmpty { return true }
        let loads = ready >= nodes ? counts : spool.claimLoads(claims, rangeLength: rangeLength)
        return ClaimPolicy.mayClaim(node: settings.node, ready: ready, loads: loads, liveNodes: nodes)
    }

    private func rangeLength(_ job: String) -> Int64? {
        guard let (key, index) = PlannedFile.parseJob(job) else { return nil }
        var plan = plansLock.withLock { plans[key] }
        if plan == nil, let read = spool.plannedFile(key) {
            plan = read
            plansLock.withLock {
                if plans.count >= 1024 { plans.removeAll() }  // a long-lived worker sees many files
                plans[key] = read
            }
        }
        guard let plan, index < plan.rangeCount else { return nil }
        let r = plan.range(index)
        return r.end - r.start + 1
    }
}
