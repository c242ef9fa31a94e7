// The planner's repair of lost jobs (`Planner.repairLostJobs`), in-process on real files: a range
// of a planned file that is not done, not ready, not claimed and has no part is queued again, but
// only once a second look finds it lost too; a part or a done range in the sidecar is not lost.
import Daemon
import Foundation
import HubTypes
import ModelCache
import Spool
@testable import TestSupport
import XCTest

final class LostJobRepairTests: ScratchDirectoryTestCase {
    private let rangeSize: Int64 = 64 << 10

    private func readyRanges(_ spool: Spool, _ plan: PlannedFile) -> [Int] {
        (0..<plan.rangeCount).filter { spool.readyJobs().contains(plan.jobName($0)) }
    }

    func testALostRangeIsQueuedAgainAfterTheSecondLookOnly() throws {
        let spool = try Spool(base: scratch, node: "here", lease: 30)
        let commit = String(repeating: "c", count: 40)
        let file = RepoFile(path: "model.safetensors", size: 4 * rangeSize, blobID: String(repeating: "a", count: 40),
                            sha256: String(repeating: "5", count: 64))
        let plan = PlannedFile(repo: "org/name", modelDir: scratch.appendingPathComponent("models/org/name").path,
                               commit: commit, file: file, rangeSize: rangeSize, node: "here")
        try spool.plan(plan, pending: [0, 1, 2, 3])
        XCTAssertEqual(readyRanges(spool, plan), [0, 1, 2, 3])
        // Range 0: its job gone and nothing else of it anywhere (a planner killed half way).
        unlink(spool.layout.ready(plan.jobName(0)))
        // Range 1: its job gone, its part published: not lost.
        unlink(spool.layout.ready(plan.jobName(1)))
        try Data(count: Int(rangeSize)).write(to: URL(fileURLWithPath: spool.partPath(plan, 1)))
        // Range 2: its job gone, the range done in the file's sidecar: not lost.
        unlink(spool.layout.ready(plan.jobName(2)))
        let directory = plan.directory
        try FileManager.default.createDirectory(at: directory.stagingDirectory, withIntermediateDirectories: true)
        let sidecar = Sidecar(path: file.path, size: file.size, rangeSize: rangeSize, commit: commit, etag: file.sha256!,
                              sha256: file.sha256, done: [2], hashedBytes: 0, hashState: nil)
        try JSONEncoder().encode(sidecar).write(to: StagingFile.sidecarURL(file.path, in: directory))

        let planner = Planner(spool: spool, rangeSize: rangeSize)
        XCTAssertTrue(planner.repairLostJobs(), "the first look only suspects range 0: it looks again soon")
        XCTAssertEqual(readyRanges(spool, plan), [3], "nothing is queued on one look")
        XCTAssertFalse(planner.repairLostJobs(), "the second look confirms it: nothing left pending")
        XCTAssertEqual(readyRanges(spool, plan), [0, 3], "range 0 is queued again; ranges 1 and 2 are not")
        XCTAssertFalse(planner.repairLostJobs())
        XCTAssertEqual(readyRanges(spool, plan), [0, 3], "a queued range is not lost")
    }
}
