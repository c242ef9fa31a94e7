// HerdWaiterTests - a waiter that shows progress while its own node's supervisor runs (it sleeps
// on the wake word and reads the shared filesystem on `SharedLooks`' interval) still judges its
// request on those looks: a record set aside in corrupt/ after the first seconds is asked again.
import Daemon
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class HerdWaiterTests: DaemonTestCase {
    let repo = "org/Herded"

    func testAProgressWaiterAsksAgainForARecordSetAsideAfterItsFirstSeconds() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 1 << 20])
        let env = environment()
        let settings = DownloadSettings.fromEnvironment(env)
        guard let handoff = Handoff(base: cacheBase, settings: settings, environment: env) else { return XCTFail("no hand-off") }
        let spool = handoff.spool
        // This process stands for the node's supervisor: its record names a running pid.
        spool.heartbeat()
        XCTAssertTrue(spool.ownSupervisorServes())
        let id = try RepoID(repo)
        let snapshot = try downloader().client.snapshot(of: id, revision: "main")
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: cacheBase, repo: id))
        let request = SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: directory.path,
                                   files: snapshot.files, node: settings.node)
        try spool.submit(request)
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? handoff.waitFor(request, timeout: 90, progress: { _ in })
            ended.signal()
        }
        Thread.sleep(forTimeInterval: 8)
        // What a supervisor does with an unreadable record: corrupt/, the generation, the word.
        XCTAssertNotNil(spool.quarantine(spool.layout.request(request.id), reason: "test: unreadable"))
        spool.wakeWord(for: .waiters)?.wakeAll()
        let path = spool.layout.request(request.id)
        let deadline = Date().addingTimeInterval(40)
        while Date() < deadline && !FileManager.default.fileExists(atPath: path) { usleep(100_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: path),
                      "the waiter (it knows the request whole) asked again within 40 s of the record going to corrupt/")
        spool.markDone(request.id)
        XCTAssertEqual(ended.wait(timeout: .now() + 20), .success, "the waiter ended on the done marker")
    }
}
