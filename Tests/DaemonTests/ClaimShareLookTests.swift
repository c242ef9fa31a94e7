// ClaimShareLookTests - the slots of a machine woken by one change judge their node's fair share
// from one listing of `jobs/claimed`, not one per claim (docs/protocol.md, "Steps": claim). A real
// worker in this process, a real spool; the listings are counted by the kernel (inotify's
// IN_OPEN on the folder), not by the code under test.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import Spool
import Synchronization
@testable import TestSupport
import XCTest

final class ClaimShareLookTests: DaemonTestCase {
    private func plan(ranges: Int, spool: Spool) -> PlannedFile {
        let file = RepoFile(path: "model.safetensors", size: Int64(ranges) * (64 << 10), blobID: String(repeating: "a", count: 40), sha256: nil)
        return PlannedFile(repo: "org/Share", modelDir: cacheBase.appendingPathComponent("models/org/Share").path,
                           commit: String(repeating: "c", count: 40), file: file, rangeSize: 64 << 10, node: spool.owner.node)
    }

    func testTheSlotsOfOneWakeUpListTheClaimsOnceAndKeepTheShare() throws {
        let worker = try Worker(cacheBase: cacheBase, environment: environment(extra: ["SPEECH_FETCH_NODE": "a"]), slots: 4, log: { _ in })
        let spool = worker.spool
        guard let view = ReadyView(spool: spool) else { throw XCTSkip("no writable /dev/shm") }
        worker.readyView = view
        // Two live nodes: this one and b (a record is a live node for the share).
        spool.heartbeat()
        XCTAssertTrue(FileManager.default.createFile(atPath: spool.layout.supervisor("b"), contents: Data("1".utf8)))
        let plan = plan(ranges: 8, spool: spool)
        try spool.plan(plan, pending: Array(0..<8))
        let claimed = try FolderOpenCounter(spool.layout.path(.claimed))
        // One wake-up: the process's slots claim one after another, as far as the share lets them.
        let ticket = 7
        var claims: [ClaimedJob] = []
        var listings = 0
        while let claim = worker.claimNext(ticket: ticket, afterWork: false) {
            claims.append(claim)
            listings += claimed.take()  // read after each claim: the kernel merges a repeated event still queued
        }
        listings += claimed.take()
        XCTAssertEqual(claims.count, 4, "node a takes its share, half of the eight ranges, not more")
        XCTAssertEqual(listings, 1, "the claims were listed once for the wake-up, not once per claim")
        // A range ends (its part published): the share has room again, with no listing.
        spool.unclaim(claims[0])
        view.claimEnded()
        XCTAssertNotNil(worker.claimNext(ticket: ticket, afterWork: true), "a finished range frees a place in the share")
        listings = claimed.take()
        XCTAssertNil(worker.claimNext(ticket: ticket, afterWork: true), "and only one")
        XCTAssertEqual(listings + claimed.take(), 0)
        // The next wake-up (another node's change) counts the claims afresh, once.
        view.invalidate()
        XCTAssertNil(worker.claimNext(ticket: ticket + 1, afterWork: false))
        listings = claimed.take()
        XCTAssertNil(worker.claimNext(ticket: ticket + 1, afterWork: true))
        XCTAssertEqual(listings + claimed.take(), 1)
    }

    /// Two worker processes of one machine (two `Worker`s here), four slots each, claiming from
    /// one shared listing at once: each slot's look runs while no other slot of the machine runs
    /// its own, so none tries a job another slot just took, and the one listing serves every claim
    /// (a lost try ends a scan and lists `jobs/ready` afresh).
    func testTheSlotsOfAMachineClaimOneAtATimeAndNeverRaceEachOther() throws {
        let env = environment(extra: ["SPEECH_FETCH_NODE": "a"])
        let workers = try (0..<2).map { _ in try Worker(cacheBase: cacheBase, environment: env, slots: 4, log: { _ in }) }
        for worker in workers {
            guard let view = ReadyView(spool: worker.spool) else { throw XCTSkip("no writable /dev/shm") }
            worker.readyView = view
        }
        let spool = workers[0].spool
        spool.heartbeat()
        let plan = plan(ranges: 48, spool: spool)
        try spool.plan(plan, pending: Array(0..<48))
        let ready = try FolderOpenCounter(spool.layout.path(.ready))
        // Read as they come: the kernel merges a listing into an identical one still unread.
        let listings = Mutex(0)
        let claiming = Mutex(true)
        let reader = Thread {
            while claiming.withLock({ $0 }) {
                let seen = ready.take()
                listings.withLock { $0 += seen }
                usleep(200)
            }
        }
        reader.start()
        let claims = Mutex(0)
        let group = DispatchGroup()
        for worker in workers {
            for _ in 0..<4 {
                group.enter()
                Thread.detachNewThread {
                    while worker.claimNext(ticket: 1, afterWork: true) != nil { claims.withLock { $0 += 1 } }
                    group.leave()
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        claiming.withLock { $0 = false }
        usleep(10_000)
        XCTAssertEqual(claims.withLock { $0 }, 48, "every range claimed once")
        XCTAssertEqual(listings.withLock { $0 } + ready.take(), 1,
                       "one listing of jobs/ready served all 48 claims: no slot lost a race to another")
    }

    /// Ten nodes wake on one listing of 32 jobs and each takes its share (4), trying jobs in its
    /// scan's order; a job another node took first is a lost race (a lookup, a touch and a rename
    /// of a name that is gone). Each node trying first the jobs it wins the draw for, then those
    /// it comes second in, the races lost are half as many as with each process's own start alone.
    func testNodesWakingTogetherTryDisjointJobsFirst() throws {
        let key = "0123456789abcdef01234567"
        let jobs = (0..<32).map { PlannedFile.jobName(key: key, index: $0) }
        let nodes = (1...10).map { "node\($0)" }
        let start = { (node: String) in Int(EndgameLookers.rank("\(node)@\(4000 + node.count)") % 1_000_003) }
        for node in nodes {
            let order = Worker.claimOrder(jobs, from: start(node), node: node, nodes: nodes)
            XCTAssertEqual(order.count, jobs.count)
            XCTAssertEqual(Set(order), Set(jobs), "every job is in every node's order once")
        }
        XCTAssertEqual(Worker.claimOrder(jobs, from: 5, node: "node1", nodes: ["node1"]), Worker.claimOrder(jobs, from: 5),
                       "a node alone keeps its scan's order")
        let withDraw = lostRaces(jobs: jobs, nodes: nodes, share: 4) { Worker.claimOrder($0, from: start($1), node: $1, nodes: nodes) }
        let startsOnly = lostRaces(jobs: jobs, nodes: nodes, share: 4) { Worker.claimOrder($0, from: start($1)) }
        XCTAssertLessThanOrEqual(withDraw * 3, startsOnly * 2, "races lost: \(withDraw) with the draw, \(startsOnly) without")
    }

    /// Rounds of nodes taking `share` jobs each from one listing, in `order`: each node still
    /// short of its share tries the next job of its listing; of the nodes trying one job in a
    /// round, one wins, and a job taken in an earlier round is a lost race too. After four lost
    /// tries in a row a node lists again (`Worker.triesPerListing`). Returns the races lost.
    private func lostRaces(jobs: [String], nodes: [String], share: Int, order: ([String], String) -> [String]) -> Int {
        var taken = Set<String>()
        var held: [String: Int] = [:]
        var listing = Dictionary(uniqueKeysWithValues: nodes.map { ($0, order(jobs, $0)) })
        var streak: [String: Int] = [:]
        var lost = 0
        for _ in 0..<200 where taken.count < jobs.count {
            var tries: [String: [String]] = [:]
            for node in nodes where held[node, default: 0] < share && !listing[node]!.isEmpty {
                let job = listing[node]!.removeFirst()
                if taken.contains(job) {
                    lost += 1
                    streak[node, default: 0] += 1
                } else {
                    tries[job, default: []].append(node)
                }
            }
            for (job, racers) in tries {
                taken.insert(job)
                held[racers[0], default: 0] += 1
                streak[racers[0]] = 0
                for loser in racers.dropFirst() { streak[loser, default: 0] += 1 }
                lost += racers.count - 1
            }
            for node in nodes where streak[node, default: 0] >= Worker.triesPerListing || listing[node]!.isEmpty {
                listing[node] = order(jobs.filter { !taken.contains($0) }, node)
                streak[node] = 0
            }
        }
        XCTAssertEqual(taken.count, jobs.count, "every job taken")
        return lost
    }
}
