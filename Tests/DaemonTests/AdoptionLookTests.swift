// AdoptionLookTests - a claimant looks in tmp/ for a part a gone claimant left only when its job
// came back after a claim (revoked, given back, repaired: the job holds a byte); the claimant of a
// fresh job, nearly every claim, does not list tmp/ for one.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import Spool
import Synchronization
import TestHub
@testable import TestSupport
import XCTest

final class AdoptionLookTests: DaemonTestCase {
    let repo = "org/Adoption"
    let path = "model.safetensors"

    /// A daemon-served download of 16 ranges lists tmp/ a few times (the sweep, the plan dropped),
    /// not once per claim: none of its jobs was ever given back.
    func testClaimantsOfFreshJobsDoNotListTmpForAPartToAdopt() throws {
        let size = 4 << 20  // 16 ranges of 256 KiB
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        try startDaemon(workers: 1, slots: 2)
        let tmp = try FolderOpenCounter(spoolPath("tmp"))
        // Read as they come: the kernel merges an open into an identical one still queued.
        let listings = Mutex(0)
        let stop = Mutex(false)
        let counting = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            while !stop.withLock({ $0 }) {
                let opened = tmp.take()
                listings.withLock { $0 += opened }
                usleep(2_000)
            }
            counting.signal()
        }
        let result = try download(repo)
        stop.withLock { $0 = true }
        counting.wait()
        listings.withLock { $0 += tmp.take() }
        XCTAssertTrue(result.handedOver, "a daemon serves the base: the call hands its request over")
        try assertSameBytes(repo, path)
        let count = listings.withLock { $0 }
        print("tmp/ listed \(count) times for 16 claims of fresh jobs")
        XCTAssertLessThan(count, 8, "tmp/ listed \(count) times for 16 claims: not once per claim")
    }

    /// A job's claimant knows whether the job came back after a claim: a fresh job's claim says
    /// no; a job given back (a worker draining), revoked (its holder dead) or made ready by a
    /// repair says yes, and its claimant looks for a part to adopt.
    func testAJobGivenBackRevokedOrRepairedIsClaimedAsGivenBack() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 1 << 20])
        let spool = try Spool(base: cacheBase, node: "node1")
        let plan = PlannedFile(repo: repo, modelDir: cacheBase.appendingPathComponent("m").path, commit: String(repeating: "a", count: 40),
                               file: RepoFile(path: path, size: 1 << 20, blobID: String(repeating: "b", count: 40), sha256: nil), rangeSize: 256 << 10, node: "node1")
        try spool.plan(plan, pending: [0, 1, 2])
        let fresh = try XCTUnwrap(spool.claim(plan.jobName(0), plan: plan))
        XCTAssertFalse(fresh.givenBack, "a fresh job was never claimed: nothing to adopt")
        spool.unclaim(fresh)
        XCTAssertEqual(try XCTUnwrap(spool.claim(plan.jobName(0), plan: plan)).givenBack, true, "given back by a draining worker")

        // A holder that is gone (a pid that runs no more) is revoked: its job comes back marked.
        let claimed = spool.layout.path(.claimed, "\(plan.jobName(1))@node1@999999")
        XCTAssertEqual(rename(spool.layout.ready(plan.jobName(1)), claimed), 0)
        XCTAssertEqual(spool.revokeExpiredClaims(), [plan.jobName(1)])
        XCTAssertEqual(try XCTUnwrap(spool.claim(plan.jobName(1), plan: plan)).givenBack, true, "revoked from a gone holder")

        XCTAssertEqual(unlink(spool.layout.ready(plan.jobName(2))), 0)
        spool.addJobs(plan, indices: [2], givenBack: true)
        XCTAssertEqual(try XCTUnwrap(spool.claim(plan.jobName(2), plan: plan)).givenBack, true, "made ready again by a repair")
    }
}
