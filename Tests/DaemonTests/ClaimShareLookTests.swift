// ClaimShareLookTests - the slots of a machine woken by one change judge their node's fair share
// from one listing of `jobs/claimed`, not one per claim (docs/protocol.md, "Steps": claim). A real
// worker in this process, a real spool; the listings are counted by the kernel (inotify's
// IN_OPEN on the folder), not by the code under test.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import Spool
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
}
