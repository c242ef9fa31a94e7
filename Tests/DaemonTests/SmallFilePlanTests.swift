// Planning a file of one range (issue 32, D7: the daemon's per-file work on 10,000 small files):
// it is planned without taking its staging lock and its plan is not synced, so the two
// guarantees those steps gave are pinned here on real files: a file some live process is writing
// (its staging lock held) is not planned, and a plan a power loss left unreadable is set aside and
// planned again, its job kept.
import Daemon
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool
import XCTest

final class SmallFilePlanTests: XCTestCase {
    private var base: URL!
    private let rangeSize: Int64 = 64 << 10
    private let commit = String(repeating: "c", count: 40)

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("small-plan-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: base)
    }

    private var modelDir: URL { base.appendingPathComponent("models/org/name") }

    /// A request for two small files, submitted to a spool of node "here".
    private func submit(_ spool: Spool) throws -> [RepoFile] {
        let files = ["config.json", "tokenizer.json"].map {
            RepoFile(path: $0, size: 1000, blobID: String(repeating: "a", count: 40), sha256: nil)
        }
        try FileManager.default.createDirectory(at: modelDir, withIntermediateDirectories: true)
        try spool.submit(SpoolRequest(repo: "org/name", revision: "main", commit: commit, modelDir: modelDir.path,
                                      files: files, node: "here"))
        return files
    }

    private func key(_ file: RepoFile) -> String { PlannedFile.key(modelDir: modelDir.path, path: file.path, commit: commit) }

    func testASmallFileALiveProcessIsWritingIsNotPlannedUntilItLetsGo() throws {
        let spool = try Spool(base: base, node: "here", lease: 30)
        let files = try submit(spool)
        // A live process of this node writes config.json (the embedded engine of a caller: this
        // test's parent stands for it): its staging lock is held.
        let directory = ModelDirectory(modelDir)
        let writer = LockOwner(node: "here", pid: getppid())
        let held = try XCTUnwrap(try StagingLock.take(files[0].path, in: directory, owner: writer, lease: 30))
        let planner = Planner(spool: spool, rangeSize: rangeSize)
        planner.planRequests()
        XCTAssertTrue(spool.lookPlan(key(files[0])).isAbsent, "a file being written is not planned beside its writer")
        XCTAssertNotNil(spool.plannedFile(key(files[1])), "the other small file is planned")
        XCTAssertEqual(spool.readyJobs(), [key(files[1]) + ".000000"])
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: directory.stagingDirectory.path))?.count, 1, "only the held lock: planning wrote nothing there")
        held.release()
        planner.planRequests()
        let plan = try XCTUnwrap(spool.plannedFile(key(files[0])), "planned once its writer let go")
        XCTAssertEqual(plan.rangeCount, 1)
        XCTAssertEqual(plan.rangeSize, files[0].size)
        XCTAssertEqual(Set(spool.readyJobs()), Set(files.map { key($0) + ".000000" }))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.stagingDirectory.path), "no staging folder left behind")
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: spool.layout.path(.tmp))) ?? [], [], "jobs and plans leave no temp file")
    }

    /// A plan is not synced before it is published: after a power loss its name may stand with
    /// no bytes, or with bytes that are not a plan. Either is set aside, and the file planned again.
    func testAPlanLeftEmptyOrGarbledByAPowerLossIsSetAsideAndPlannedAgain() throws {
        let spool = try Spool(base: base, node: "here", lease: 30)
        let files = try submit(spool)
        let planner = Planner(spool: spool, rangeSize: rangeSize)
        planner.planRequests()
        for file in files { XCTAssertNotNil(spool.plannedFile(key(file))) }
        // What a power loss can leave of a plan whose bytes never reached the disk.
        let emptied = spool.layout.plan(key(files[0]))
        let zeroed = spool.layout.plan(key(files[1]))
        XCTAssertEqual(truncate(emptied, 0), 0)
        let length = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: zeroed)[.size] as? Int)
        try Data(count: length).write(to: URL(fileURLWithPath: zeroed))

        // Another process (a worker) reads them: set aside, not taken for plans.
        let reader = try Spool(base: base, node: "here", lease: 30)
        for file in files { XCTAssertNil(reader.plannedFile(key(file))) }
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: spool.layout.path(.corrupt)))?.count, 2, "both set aside in corrupt/")
        // The next pass plans both again; their jobs were kept, and are there once.
        planner.planRequests()
        for file in files {
            let plan = try XCTUnwrap(reader.plannedFile(key(file)), "\(file.path) is planned again")
            XCTAssertEqual(plan.file, file)
        }
        XCTAssertEqual(Set(spool.readyJobs()), Set(files.map { key($0) + ".000000" }))
    }
}
