// WallClockTests - `speech wait --timeout` keeps its time on the monotonic clock: in a process
// whose wall clock stands still (FrozenWallClock) it still ends, as it must when the clock is set
// back (by an operator, NTP, a VM restored from a snapshot).
import Daemon
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class WallClockTests: DaemonTestCase {
    let repo = "org/Clocked"
    let path = "model.safetensors"

    func frozenClockEnvironment() throws -> [String: String] {
        environment(extra: ["LD_PRELOAD": try FrozenWallClock.build(in: temp.appendingPathComponent("clock"))])
    }

    func testAWaitTimesOutWhenTheWallClockStandsStill() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 1 << 20])
        // A request nobody serves: the waiter's --timeout is what ends it.
        let settings = DownloadSettings.fromEnvironment(environment())
        let spool = try Spool(base: cacheBase, node: settings.node, lease: settings.lease)
        let id = try RepoID(repo)
        let snapshot = try downloader().client.snapshot(of: id, revision: "main")
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: cacheBase, repo: id))
        try spool.submit(SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: directory.path,
                                      files: snapshot.files, node: settings.node))
        Planner(spool: spool, rangeSize: 256 << 10).planRequests()
        let waiter = try launch(speechBinary, ["wait", repo, "--cache-base", cacheBase.path, "--timeout", "2"],
                                environment: try frozenClockEnvironment(), hint: "wait")
        // On the wall clock its 2 s never pass: it would wait for ever.
        XCTAssertTrue(waitForExit(waiter.process, timeout: 30), "the wait ended on its own: \(contents(waiter.stderr))")
        XCTAssertEqual(waiter.process.terminationStatus, 2, "it timed out: \(contents(waiter.stderr))")
    }
}
