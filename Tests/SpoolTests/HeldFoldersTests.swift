// A spool's folders held open (docs/protocol.md, "Held folders"): a process looks each folder's
// path up once, and its calls on the spool's files are made relative to the folder, so a network
// filesystem's client does not look the path's folders up again at the file server every second;
// a folder removed and made again under the process is opened again. Real files, in-process.
import Foundation
import HubTypes
import ModelCache
import SharedFiles
@testable import Spool
@testable import TestSupport
import XCTest

final class HeldFoldersTests: ScratchDirectoryTestCase {
    private func plannedFile(ranges: Int) -> PlannedFile {
        let rangeSize: Int64 = 64 << 10
        let file = RepoFile(path: "model.safetensors", size: rangeSize * Int64(ranges), blobID: String(repeating: "a", count: 40),
                            sha256: String(repeating: "b", count: 64))
        return PlannedFile(repo: "org/name", modelDir: scratch.appendingPathComponent("models/org/name").path,
                           commit: String(repeating: "c", count: 40), file: file, rangeSize: rangeSize, node: "node1")
    }

    /// Moving the spool away under a process stands in for a file server that is not asked for
    /// the path's folders again: the calls still reach the folders the process opened, through
    /// their descriptors (by path, every one of these would find nothing).
    func testASpoolsCallsGoThroughTheFoldersItOpenedNotTheirPaths() throws {
        let spool = try Spool(base: scratch, node: "node1")
        let plan = plannedFile(ranges: 2)
        try spool.plan(plan, pending: [0, 1])
        XCTAssertEqual(spool.readyJobs().count, 2)
        XCTAssertEqual(spool.state(of: "r1"), .active)

        let moved = scratch.appendingPathComponent("spool-moved").path
        XCTAssertEqual(rename(spool.root, moved), 0)
        XCTAssertEqual(spool.readyJobs(), [plan.jobName(0), plan.jobName(1)], "listed through the held jobs/ready")
        let claim = try XCTUnwrap(spool.claim(plan.jobName(0)), "the plan read and the job renamed through held folders")
        XCTAssertEqual(spool.claimedJobs(), [plan.jobName(0)])
        XCTAssertTrue(spool.refresh(claim))
        spool.markDone("r1")
        XCTAssertEqual(spool.state(of: "r1"), .done)
        XCTAssertTrue(FileManager.default.fileExists(atPath: moved + "/jobs/claimed/" + (claim.path as NSString).lastPathComponent))
        XCTAssertTrue(FileManager.default.fileExists(atPath: moved + "/done/r1"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.root), "nothing made again at the old path")
    }

    /// A spool reset under a running process: folders removed and made again. The held
    /// descriptors name the removed folders; each is noticed at its next use (a lookup that finds
    /// nothing, a listing that is empty) and opened again by path, so the process sees and
    /// writes the new folders.
    func testAHeldFolderRemovedAndMadeAgainIsOpenedAgain() throws {
        let spool = try Spool(base: scratch, node: "node1")
        XCTAssertEqual(spool.readyJobs(), [])
        XCTAssertEqual(spool.state(of: "r1"), .active)
        XCTAssertEqual(spool.claimedJobs(), [])

        for folder in [SpoolLayout.Folder.ready, .done, .tmp, .claimed] {
            let path = spool.layout.path(folder)
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        }
        XCTAssertTrue(FileManager.default.createFile(atPath: spool.layout.ready("job.0"), contents: nil))
        XCTAssertTrue(FileManager.default.createFile(atPath: spool.layout.doneMarker("r1"), contents: nil))

        XCTAssertEqual(spool.readyJobs(), ["job.0"], "the listing of the removed folder was empty: opened again")
        XCTAssertEqual(spool.state(of: "r1"), .done, "a lookup in the removed folder found nothing: opened again")
        spool.markDone("r2")  // written in tmp/, linked into done/
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool.layout.doneMarker("r2")))
        XCTAssertEqual(spool.claimedJobs(), [])
    }

    /// A held folder is listed with getdents64 in 32 KiB reads: a folder that takes several reads
    /// is listed whole, each name once.
    func testAListingOfManyReadsHasEveryNameOnce() throws {
        let spool = try Spool(base: scratch, node: "node1")
        let names = (0..<3000).map { String(format: "%@.%06d", String(repeating: "a", count: 24), $0) }
        for name in names { XCTAssertTrue(FileManager.default.createFile(atPath: spool.layout.ready(name), contents: nil)) }
        XCTAssertEqual(spool.readyJobs(), names)
    }

    /// An absent name in a folder that is still there is an answer, not a reason to open the
    /// folder again; and a folder that is gone for good reads as absent, as by path.
    func testAnAbsentNameIsAbsentAndAFolderGoneForGoodReadsAsAbsent() throws {
        let spool = try Spool(base: scratch, node: "node1")
        XCTAssertEqual(spool.folders.exists(spool.layout.doneMarker("nothing")), false)
        XCTAssertEqual(spool.folders.names(spool.layout.path(.endgame)), [])
        try FileManager.default.removeItem(atPath: spool.layout.path(.endgame))
        XCTAssertTrue(spool.folders.list(spool.layout.path(.endgame)).isAbsent)
        XCTAssertEqual(spool.folders.exists(spool.layout.endgameMarker("job.0")), false)
    }
}
