// A request planned by hand, as a supervisor plans it, with no daemon running: what the daemon
// tests that stage a worker's leftovers (an orphan part, another node's progress record) start from.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import Spool
@testable import TestSupport
import XCTest

extension DaemonTestCase {
    /// Resolves `repo`, writes its request for `path` and plans it in ranges of `rangeSize` as a
    /// supervisor would; returns the spool and the planned file, every range ready.
    func planByHand(_ repo: String, _ path: String, rangeSize: Int,
                    file: StaticString = #filePath, line: UInt = #line) throws -> (Spool, PlannedFile) {
        let settings = DownloadSettings.fromEnvironment(environment())
        let spool = try Spool(base: cacheBase, node: settings.node, lease: settings.lease)
        let id = try RepoID(repo)
        let snapshot = try downloader().client.snapshot(of: id, revision: "main")
        let repoFile = try XCTUnwrap(snapshot.files.first { $0.path == path }, file: file, line: line)
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: cacheBase, repo: id))
        try spool.submit(SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: directory.path,
                                      files: [repoFile], node: settings.node))
        Planner(spool: spool, rangeSize: Int64(rangeSize)).planRequests()
        let key = PlannedFile.key(modelDir: directory.path, path: path, commit: snapshot.commit)
        let plan = try XCTUnwrap(spool.plannedFile(key), "the planner planned the file", file: file, line: line)
        XCTAssertEqual(names("jobs/ready").count, plan.rangeCount, file: file, line: line)
        return (spool, plan)
    }
}
