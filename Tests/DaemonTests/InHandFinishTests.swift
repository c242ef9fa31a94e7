// A file of one range fetched into its staging file and finished by the worker that claimed it (docs/protocol.md, "Steps", finish
// in hand; issue 32, D7): no part is made or published, no splicer has to find one, and
// the worker renames the verified file into place, drops the plan and settles the request. A real
// worker in this process against the test Hub, with no supervisor: nothing else splices.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import Spool
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class InHandFinishTests: DaemonTestCase {
    let repo = "org/InHand"
    let paths = ["config.json", "tokenizer.json", "a/vocab.txt", "a/b/merges.txt", "README.md"]

    func testAWorkerFinishesTheFilesOfOneRangeItFetchesWithNoSplicer() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: Dictionary(uniqueKeysWithValues: paths.enumerated().map { ($1, 700 + 900 * $0) }))
        let (spool, requestID) = try submitAndPlan()
        let worker = try Worker(cacheBase: cacheBase, environment: environment(), slots: 2, log: { _ in })
        let stop = StopFlag()
        let running = Thread { worker.run(shouldStop: { stop.isSet }) }
        running.start()
        defer {
            stop.set()
            _ = waitUntil(timeout: 10) { running.isFinished }
        }
        let finished = waitUntil(timeout: 20) { self.paths.allSatisfy { self.finalExists(self.repo, $0) } }
        XCTAssertTrue(finished, "every file is final with no supervisor to splice; parts/: \(names("parts")), tmp/: \(names("tmp"))")
        for path in paths { try assertSameBytes(repo, path) }
        XCTAssertTrue(waitUntil(timeout: 5) { spool.state(of: requestID) == .done }, "the worker settled the request")
        XCTAssertEqual(names("parts"), [], "no part was published")
        XCTAssertEqual(names("plans"), [], "every plan was dropped")
        XCTAssertEqual(names("jobs/claimed"), [], "every claim was dropped")
        XCTAssertEqual(names("tmp"), [], "no part was left in tmp/")
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(".incomplete").path),
                       "nothing is left staged")
    }

    /// A worker killed after renaming the file into place and dropping its claim, before it
    /// dropped the plan, leaves the plan with no job, claim or part: the repair of lost jobs finds
    /// the file final and drops the plan (nothing is fetched again), and settling marks the
    /// request done.
    func testAPlanLeftBehindAFinalFileIsDroppedByTheRepairWithNoFetch() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["config.json": 900])
        let (spool, requestID) = try submitAndPlan()
        // What the killed worker left: the file final, the plan, no job and no claim.
        try FileManager.default.createDirectory(at: modelDir(repo), withIntermediateDirectories: true)
        try source(repo, "config.json").write(to: modelDir(repo).appendingPathComponent("config.json"))
        for name in names("jobs/ready") { XCTAssertEqual(unlink(spoolPath("jobs/ready/\(name)")), 0) }
        XCTAssertEqual(names("plans").count, 1)
        _ = Planner(spool: spool, rangeSize: 64 << 20).repairLostJobs()
        XCTAssertEqual(names("plans"), [], "the plan of a final file was dropped")
        XCTAssertEqual(names("jobs/ready"), [], "nothing is fetched again")
        Splicer(spool: spool).settleRequests()
        XCTAssertEqual(spool.state(of: requestID), .done)
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/config.json"), 0, "the file was not fetched")
    }

    /// Resolves the repo, writes its request and plans it as a supervisor would (no daemon runs).
    private func submitAndPlan() throws -> (Spool, String) {
        let settings = DownloadSettings.fromEnvironment(environment())
        let spool = try Spool(base: cacheBase, node: settings.node, lease: settings.lease)
        let id = try RepoID(repo)
        let snapshot = try downloader().client.snapshot(of: id, revision: "main")
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: cacheBase, repo: id))
        let request = SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: directory.path,
                                   files: snapshot.files, node: settings.node)
        try spool.submit(request)
        Planner(spool: spool, rangeSize: 64 << 20).planRequests()
        XCTAssertEqual(spool.plannedFiles().count, snapshot.files.count, "every file is planned")
        XCTAssertTrue(spool.plannedFiles().allSatisfy { $0.rangeCount == 1 }, "each file is one range")
        return (spool, request.id)
    }
}

/// A flag the test sets and a worker's loop reads from another thread.
private final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
