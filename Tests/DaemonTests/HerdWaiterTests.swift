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

    /// A progress waiter whose own node's workers fetch ranges of its request (a herd: every node
    /// fetches its share) reads the sidecar on the shared looks' lengthening interval and once a
    /// range of its node landed, not at every half-second tick.
    func testAWaiterWhoseNodeFetchesARangeDoesNotReadTheSidecarAtEveryTick() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 1 << 20])
        let env = environment()
        let settings = DownloadSettings.fromEnvironment(env)
        guard let handoff = Handoff(base: cacheBase, settings: settings, environment: env) else { return XCTFail("no hand-off") }
        let spool = handoff.spool
        spool.heartbeat()  // this process stands for the node's supervisor
        let id = try RepoID(repo)
        let snapshot = try downloader().client.snapshot(of: id, revision: "main")
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: cacheBase, repo: id))
        let request = SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: directory.path,
                                   files: snapshot.files, node: settings.node)
        try spool.submit(request)
        // The file's staging sidecar, and a range of it this node's worker (this process) fetches.
        let sidecar = StagingFile.sidecarURL("model.safetensors", in: directory)
        try FileManager.default.createDirectory(at: sidecar.deletingLastPathComponent(), withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: sidecar.path, contents: Data("{}".utf8)))
        let key = PlannedFile.key(modelDir: directory.path, path: "model.safetensors", commit: snapshot.commit)
        let live = try XCTUnwrap(LiveProgress(spool: spool))
        let range = live.begin(job: PlannedFile.jobName(key: key, index: 0))
        let opens = try FolderOpenCounter(sidecar.deletingLastPathComponent().path)
        let ticks = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? handoff.waitFor(request, timeout: 90, progress: { _ in ticks.signal() })
            ended.signal()
        }
        var reads = 0
        for _ in 0..<16 {
            XCTAssertEqual(ticks.wait(timeout: .now() + 10), .success, "a progress tick")
            reads += opens.take(entry: sidecar.lastPathComponent)
        }
        XCTAssertLessThanOrEqual(reads, 12, "16 ticks while this node fetched a range: the sidecar read on the lengthening interval")
        XCTAssertGreaterThanOrEqual(reads, 3, "and still read on it")
        // The range lands (its part published): one look follows once its splice had time.
        range?.remove()
        let landed = Date()
        var lookedAfter = false
        while !lookedAfter && Date().timeIntervalSince(landed) < 20 {
            XCTAssertEqual(ticks.wait(timeout: .now() + 10), .success)
            lookedAfter = opens.take(entry: sidecar.lastPathComponent) > 0
        }
        XCTAssertTrue(lookedAfter, "the sidecar was read after this node's range landed")
        spool.markDone(request.id)
        XCTAssertEqual(ended.wait(timeout: .now() + 20), .success, "the waiter ended on the done marker")
    }
}
