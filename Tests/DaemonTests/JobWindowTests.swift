// The job window (docs/protocol.md, "Job window"): a plan publishes at most a window of range
// jobs; the splicer publishes the next as ranges become done; the repair of lost jobs tells a
// lost range from one not yet published. Real files, a real spool, a real daemon.
@testable import Daemon
import Digest
import Foundation
import HubTypes
import ModelCache
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class JobWindowTests: DaemonTestCase {
    let repo = "org/Window"
    let path = "model.safetensors"
    private var savedWindow = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        savedWindow = JobWindow.size
    }

    override func tearDownWithError() throws {
        JobWindow.size = savedWindow
        try super.tearDownWithError()
    }

    private func plan(ranges: Int, spool: Spool) -> PlannedFile {
        let file = RepoFile(path: path, size: Int64(ranges) * (64 << 10), blobID: String(repeating: "a", count: 40), sha256: nil)
        return PlannedFile(repo: repo, modelDir: cacheBase.appendingPathComponent("models/\(repo)").path,
                           commit: String(repeating: "c", count: 40), file: file, rangeSize: 64 << 10, node: spool.owner.node)
    }

    private func ready(_ spool: Spool, _ plan: PlannedFile) -> [Int] {
        spool.readyJobs().compactMap { PlannedFile.parseJob($0) }.filter { $0.key == plan.key }.map(\.index).sorted()
    }

    /// A lost job inside the window is made ready again after two looks; the ranges beyond the
    /// window are not taken for lost (they are published as the window moves), and none twice.
    func testTheRepairOfLostJobsRefillsOnlyTheWindow() throws {
        JobWindow.size = 3
        let spool = try Spool(base: cacheBase, node: "n1")
        let plan = plan(ranges: 10, spool: spool)
        try spool.plan(plan, pending: JobWindow.fitting(Array(0..<10), inFlight: 0))
        XCTAssertEqual(ready(spool, plan), [0, 1, 2], "the plan publishes its window")
        unlink(spool.layout.ready(plan.jobName(1)))  // lost (a planner that died half way)
        let planner = Planner(spool: spool, rangeSize: 64 << 10)
        XCTAssertTrue(planner.repairLostJobs(), "one suspect, looked at again soon")
        XCTAssertEqual(ready(spool, plan), [0, 2], "not at the first look")
        XCTAssertFalse(planner.repairLostJobs())
        XCTAssertEqual(ready(spool, plan), [0, 1, 2], "the lost range is back; ranges 3-9 wait for room")
        // Nothing in flight at all (a splicer that died before publishing the next ranges):
        // the repair publishes the window's worth, lowest first.
        for index in [0, 1, 2] { unlink(spool.layout.ready(plan.jobName(index))) }
        planner.repairLostJobs()
        planner.repairLostJobs()
        XCTAssertEqual(ready(spool, plan), [0, 1, 2])
    }

    /// Parts spliced leave room: the splicer publishes the next ranges, lowest first, never one
    /// in flight or done.
    func testTheSplicerPublishesTheNextRangesAsRangesBecomeDone() throws {
        JobWindow.size = 3
        let spool = try Spool(base: cacheBase, node: "n1")
        let plan = plan(ranges: 10, spool: spool)
        _ = try StagingFile(file: plan.file, in: plan.directory, commit: plan.commit, rangeSize: plan.rangeSize)
        try spool.plan(plan, pending: JobWindow.fitting(Array(0..<10), inFlight: 0))
        // A worker takes range 0 and 1, publishes range 0's part; 1 stays claimed.
        let first = try XCTUnwrap(spool.claim(plan.jobName(0)))
        _ = try XCTUnwrap(spool.claim(plan.jobName(1)))
        let temp = spool.partTempPath(first)
        try Data(count: 64 << 10).write(to: URL(fileURLWithPath: temp))
        XCTAssertTrue(try spool.publishPart(temp, for: first))
        XCTAssertEqual(Splicer(spool: spool).splice(plan), .progressed)
        XCTAssertEqual(ready(spool, plan), [2, 3], "range 0 done, 1 claimed, 2 ready: room for one more, range 3")
    }

    /// A normal multi-range download under the daemon with a window much smaller than the file:
    /// every byte once, the file verified, nothing left in the spool.
    func testADaemonDownloadOfManyRangesThroughASmallWindowCompletes() throws {
        let size = 6 << 20  // 24 ranges of 256 KiB
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        try startDaemon(workers: 2, slots: 2, extra: ["SPEECH_FETCH_JOB_WINDOW": "3"])
        let (p, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path], extra: ["SPEECH_FETCH_JOB_WINDOW": "3"])
        var most = 0
        XCTAssertTrue(waitUntil(timeout: 60) {
            // By job name: a job claimed between the two listings is in both, and counts once.
            let claimed = self.names("jobs/claimed").map { String($0.prefix { $0 != "@" }) }
            most = max(most, Set(self.names("jobs/ready") + claimed).count)
            return !p.isRunning
        })
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        XCTAssertLessThanOrEqual(most, 3, "at most the window in flight")
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), size, "each byte served once")
        XCTAssertEqual(names("plans"), [])
        XCTAssertEqual(names("jobs/ready"), [])
    }
}
