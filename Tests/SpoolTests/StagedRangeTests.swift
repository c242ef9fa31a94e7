// Ranges written straight into the staging file (docs/protocol.md, "fetch", "publish",
// "splice"): the part a worker publishes is a record naming the staging file (its tag and inode),
// the splicer folds it in without copying, the hash pass reads only recorded ranges, a record for
// a staging file that was started over is never trusted, and a range written twice is harmless.
// Real files, in-process.
import Digest
import Foundation
import HubTypes
import ModelCache
@testable import Spool
@testable import TestSupport
import XCTest

final class StagedRangeTests: ScratchDirectoryTestCase {
    private let rangeSize: Int64 = 64 << 10

    /// A planned file of `ranges` whole ranges and its bytes (no short last range: each is long
    /// enough for a record).
    private func plannedFile(ranges: Int) -> (PlannedFile, Data) {
        PlannedFile.patterned(size: Int(rangeSize) * ranges, rangeSize: rangeSize, in: scratch)
    }

    /// node1's spool in the scratch folder and a planned file of `ranges` whole ranges, its
    /// staging file and tagged sidecar made as the planner makes them; and the file's bytes.
    private func stagedFile(ranges: Int) throws -> (Spool, PlannedFile, Data) {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let (plan, bytes) = plannedFile(ranges: ranges)
        _ = try plan.openStaging()
        return (spool, plan, bytes)
    }

    /// The splicer finalizes `plan`: its final file holds `bytes`.
    private func assertSplicedIntoPlace(_ spool: Spool, _ plan: PlannedFile, _ bytes: Data, _ message: String = "",
                                        file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(Splicer(spool: spool).splice(plan), .finalized, message, file: file, line: line)
        XCTAssertEqual(try Data(contentsOf: plan.directory.finalURL(plan.file.path)), bytes, file: file, line: line)
    }

    private func claim(_ spool: Spool, _ plan: PlannedFile, _ index: Int) -> ClaimedJob {
        let name = plan.jobName(index)
        return ClaimedJob(name: name, path: spool.layout.path(.claimed, "\(name)@\(spool.owner.node)@\(spool.owner.pid)"),
                          plan: plan, index: index)
    }

    /// Writes range `index` in place as a worker does (`content` instead of the file's bytes when
    /// given), with its progress record as long as the range; publishes the record unless told not to.
    @discardableResult
    private func writeInPlace(_ spool: Spool, _ plan: PlannedFile, _ index: Int, _ bytes: Data, content: Data? = nil,
                              publish: Bool = true) throws -> Bool {
        let job = claim(spool, plan, index)
        let staged = try XCTUnwrap(spool.openStagedRange(job), "a range of a file with a tagged sidecar is written in place")
        let r = plan.range(index)
        let body = content ?? bytes.subdata(in: Int(r.start)..<Int(r.end + 1))
        XCTAssertEqual(body.withUnsafeBytes { pwrite(staged.fd, $0.baseAddress, $0.count, off_t(r.start)) }, body.count)
        let progress = spool.partTempPath(job, staged: staged)
        let fd = open(progress, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        XCTAssertEqual(ftruncate(fd, off_t(r.end - r.start + 1)), 0)
        close(fd)
        guard publish else { return true }
        return try spool.publishStagedRange(staged, progress: progress, for: job)
    }

    private func sidecar(_ plan: PlannedFile) -> Sidecar? {
        Sidecar.look(plan.file.path, in: plan.directory).value ?? nil
    }

    func testARangeWrittenInPlaceIsFoldedInFromItsRecordAndTheFileFinalizes() throws {
        let (spool, plan, bytes) = try stagedFile(ranges: 3)
        XCTAssertNotNil(sidecar(plan)?.stagingTag, "a new sidecar tags its staging file")
        try writeInPlace(spool, plan, 1, bytes)
        let record = try XCTUnwrap(StagedRangeRecord.look(at: spool.partPath(plan, 1)).value ?? nil, "the part is a record")
        XCTAssertEqual(record.index, 1)
        var st = stat()
        XCTAssertEqual(stat(spool.partPath(plan, 1), &st), 0)
        XCTAssertEqual(Int64(st.st_size), rangeSize, "a record is as long as its range (endgame and adoption read its size)")
        XCTAssertLessThan(Int64(st.st_blocks) * 512, rangeSize, "and holds none of its bytes")

        XCTAssertEqual(Splicer(spool: spool).splice(plan), .progressed)
        XCTAssertEqual(try plan.openStaging().doneRanges, [1])
        try writeInPlace(spool, plan, 0, bytes)
        try writeInPlace(spool, plan, 2, bytes)
        try assertSplicedIntoPlace(spool, plan, bytes)
    }

    /// A record names the staging file it was written into: once that file was started over (its
    /// sidecar gone, a new one with a new tag), the record is dropped and its range fetched again,
    /// never marked done over bytes the new file does not hold.
    func testARecordForAStagingFileStartedOverIsIgnoredAndItsRangeFetchedAgain() throws {
        let (spool, plan, bytes) = try stagedFile(ranges: 3)
        let job = claim(spool, plan, 0)
        let staged = try XCTUnwrap(spool.openStagedRange(job))
        let r = plan.range(0)
        let body = bytes.subdata(in: Int(r.start)..<Int(r.end + 1))
        XCTAssertEqual(body.withUnsafeBytes { pwrite(staged.fd, $0.baseAddress, $0.count, 0) }, body.count)
        // The staging file is started over meanwhile (`speech cache clean`, a sidecar that no
        // longer matched): its sidecar and data go, a new file and sidecar are made.
        let old = try plan.openStaging()
        unlink(old.sidecarURL.path)
        unlink(old.dataURL.path)
        let fresh = try plan.openStaging()
        XCTAssertNotEqual(fresh.stagingTag, staged.record.tag)
        let progress = spool.partTempPath(job, staged: staged)
        let fd = open(progress, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        XCTAssertEqual(ftruncate(fd, off_t(rangeSize)), 0)
        close(fd)
        XCTAssertTrue(try spool.publishStagedRange(staged, progress: progress, for: job))

        XCTAssertEqual(Splicer(spool: spool).splice(plan), .nothing)
        XCTAssertEqual(try plan.openStaging().doneRanges, [], "the stale record marks nothing done")
        XCTAssertEqual(spool.hasPart(plan, 0), false, "it is dropped")
        XCTAssertEqual(spool.readyJobs(), [plan.jobName(0)], "and its range is ready to be fetched again")
        // The range fetched again into the new staging file completes it.
        unlink(spool.layout.ready(plan.jobName(0)))
        for index in 0..<3 { try writeInPlace(spool, plan, index, bytes) }
        try assertSplicedIntoPlace(spool, plan, bytes)
    }

    /// An endgame duplicate (or a revoked claimant still running) writes the same range into the
    /// same staging file: same bytes, and only the first record published counts.
    func testARangeWrittenTwiceInPlaceIsHarmlessAndOneRecordWins() throws {
        let (spool, plan, bytes) = try stagedFile(ranges: 2)
        let job = claim(spool, plan, 0)
        let first = try XCTUnwrap(spool.openStagedRange(job))
        let second = try XCTUnwrap(spool.openStagedRange(job))
        let body = bytes.subdata(in: 0..<Int(rangeSize))
        // Interleaved writes of the same bytes, as two connections deliver them.
        let half = Int(rangeSize) / 2
        body.withUnsafeBytes { all in
            _ = pwrite(second.fd, all.baseAddress! + half, half, off_t(half))
            _ = pwrite(first.fd, all.baseAddress!, Int(rangeSize), 0)
            _ = pwrite(second.fd, all.baseAddress!, half, 0)
        }
        var published: [Bool] = []
        for staged in [first, second] {
            let progress = spool.partTempPath(job, staged: staged)
            let fd = open(progress, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            XCTAssertEqual(ftruncate(fd, off_t(rangeSize)), 0)
            close(fd)
            published.append(try spool.publishStagedRange(staged, progress: progress, for: job))
        }
        XCTAssertEqual(published, [true, false], "the first record wins; the second is discarded")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: spool.layout.path(.tmp)).filter { $0.hasPrefix("part-") }, [])
        try writeInPlace(spool, plan, 1, bytes)
        try assertSplicedIntoPlace(spool, plan, bytes)
    }

    /// The hash advances only over the contiguous prefix of recorded ranges: a range written but
    /// not recorded (garbage for now, as a writer mid-range leaves it) is never read, so the file
    /// still verifies once the range's real bytes are recorded.
    func testTheHashPassNeverReadsARangeThatIsNotRecorded() throws {
        let (spool, plan, bytes) = try stagedFile(ranges: 3)
        try writeInPlace(spool, plan, 1, bytes, content: Data(repeating: 0xEE, count: Int(rangeSize)), publish: false)
        try writeInPlace(spool, plan, 0, bytes)
        try writeInPlace(spool, plan, 2, bytes)
        XCTAssertEqual(Splicer(spool: spool).splice(plan), .progressed)
        let record = try XCTUnwrap(sidecar(plan))
        XCTAssertEqual(Set(record.done), [0, 2])
        XCTAssertEqual(record.hashedBytes, rangeSize, "the hash stopped at the first range not recorded")
        // The range's writer finishes it (its real bytes) and publishes its record.
        for name in try FileManager.default.contentsOfDirectory(atPath: spool.layout.path(.tmp)) where name.hasPrefix("part-") {
            unlink(spool.layout.path(.tmp, name))
        }
        try writeInPlace(spool, plan, 1, bytes)
        try assertSplicedIntoPlace(spool, plan, bytes, "the digest matched: range 1's garbage was never hashed")
    }

    /// A file under repair fetches its ranges again as parts to compare with the staged bytes: no
    /// range of it is written in place. Neither is a file of one range (it has no sidecar).
    func testRangesOfAFileUnderRepairOrOfOneRangeComeAsParts() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let (one, _) = plannedFile(ranges: 1)
        XCTAssertNil(spool.openStagedRange(claim(spool, one, 0)))
        let (plan, bytes) = plannedFile(ranges: 2)
        _ = try plan.openStaging()
        for index in 0..<2 { try writeInPlace(spool, plan, index, bytes, content: Data(repeating: 1, count: Int(rangeSize))) }
        XCTAssertEqual(Splicer(spool: spool).splice(plan), .progressed, "the file did not verify: under repair")
        XCTAssertNotNil(sidecar(plan)?.repair)
        XCTAssertNil(spool.openStagedRange(claim(spool, plan, 0)), "a range under repair is fetched into a part")
    }
}
