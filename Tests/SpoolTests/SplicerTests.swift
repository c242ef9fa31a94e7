// The splicer's record of done ranges when its own look at the sidecar is older than the last
// writer's (a network filesystem's client serves a renamed-over file's old content for about a
// second), and its judgement of a part's size. Real files, in-process.
import Digest
import Foundation
import HubTypes
import ModelCache
import Spool
@testable import TestSupport
import XCTest

final class SplicerTests: ScratchDirectoryTestCase {
    private let rangeSize: Int64 = 64 << 10

    /// A planned file of `ranges` ranges (the last one short) and its bytes.
    private func plannedFile(ranges: Int) -> (PlannedFile, Data) {
        PlannedFile.patterned(size: Int(rangeSize) * (ranges - 1) + 1000, rangeSize: rangeSize, in: scratch)
    }

    /// Publishes range `index` of `bytes` as a worker does: a whole part under `parts/`.
    private func publishPart(_ spool: Spool, _ plan: PlannedFile, _ index: Int, _ bytes: Data, size: Int? = nil) throws {
        let r = plan.range(index)
        var part = bytes.subdata(in: Int(r.start)..<Int(r.end + 1))
        if let size { part = part.prefix(size) }
        try part.write(to: URL(fileURLWithPath: spool.partPath(plan, index)))
    }

    /// What happened in cluster-test B on GlusterFS: node3's splicer recorded range 20 and its next
    /// pass dropped the part; node1's splicer, which had read the sidecar before (its client still
    /// served the old one), recorded its own range over it. Range 20 was then neither done nor
    /// fetched, and repair fetched it again. The sidecar a splicer writes keeps what the one on
    /// disk lists.
    func testARecordOlderThanTheSidecarOnDiskKeepsTheRangesTheSidecarLists() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let (plan, bytes) = plannedFile(ranges: 3)
        _ = try plan.openStaging()  // the planner makes the staging file and its sidecar (no range done)
        // The sidecar as a client that has not seen the next write yet reads it.
        let late = try plan.openStaging()
        XCTAssertEqual(late.doneRanges, [])

        // Another node splices ranges 0 and 1 and records them; its next pass drops their parts.
        try publishPart(spool, plan, 0, bytes)
        try publishPart(spool, plan, 1, bytes)
        let splicer = Splicer(spool: spool)
        XCTAssertEqual(splicer.splice(plan), .progressed)
        XCTAssertEqual(splicer.splice(plan), .progressed)
        XCTAssertEqual(spool.hasPart(plan, 0), false, "a part the sidecar lists is dropped")
        XCTAssertEqual(spool.hasPart(plan, 1), false)

        // The late reader splices range 2 and records it.
        try publishPart(spool, plan, 2, bytes)
        try late.splice(partAt: spool.partPath(plan, 2), index: 2)
        late.markDone(2)
        try late.persist()

        XCTAssertEqual(try plan.openStaging().doneRanges, [0, 1, 2], "the ranges recorded meanwhile are still listed")
        XCTAssertEqual(splicer.splice(plan), .finalized)
        XCTAssertEqual(try Data(contentsOf: plan.directory.finalURL(plan.file.path)), bytes)
    }

    /// A staging file started over (no sidecar of this transfer was there) writes its own record:
    /// there is nothing on disk to keep.
    func testAFreshStagingFileDoesNotFoldInAnOldSidecar() throws {
        let (plan, _) = plannedFile(ranges: 3)
        let staging = try plan.openStaging()
        XCTAssertFalse(staging.openedFromRecord)
        XCTAssertTrue(try plan.openStaging().openedFromRecord)
    }

    /// On a network filesystem (`settle` > 0) a pass that records ranges writes the sidecar only
    /// `settle` seconds after it took the lock, when its last look at the sidecar reads the
    /// previous holder's write.
    func testAPassRecordsItsRangesNoSoonerThanSettleAfterItTookTheLock() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30, settle: 0.6)
        let (plan, bytes) = plannedFile(ranges: 3)
        try publishPart(spool, plan, 0, bytes)
        let start = Date()
        XCTAssertEqual(Splicer(spool: spool).splice(plan), .progressed)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.6)
        XCTAssertEqual(try plan.openStaging().doneRanges, [0])
    }

    /// A part whose size every look reads wrong is dropped and its range made ready again; one of
    /// the right size is spliced.
    func testAPartOfASteadyWrongSizeIsDroppedAndItsRangeReadyAgain() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let (plan, bytes) = plannedFile(ranges: 3)
        try publishPart(spool, plan, 0, bytes, size: 1000)
        try publishPart(spool, plan, 1, bytes)
        XCTAssertEqual(Splicer(spool: spool).splice(plan), .progressed)
        XCTAssertEqual(spool.hasPart(plan, 0), false, "the wrong part is gone")
        XCTAssertEqual(spool.readyJobs(), [plan.jobName(0)], "its range is ready again")
        XCTAssertEqual(try plan.openStaging().doneRanges, [1])
    }
}
