// HerdWaiterTests - a waiter that shows progress while its own node's supervisor runs (it sleeps
// on the wake word and reads the shared filesystem on `SharedLooks`' interval) still judges its
// request on those looks: a record set aside in corrupt/ after the first seconds is asked again.
// While its node's workers fetch ranges of the request it reads the shared layer on that interval
// too, not at every tick, and counts a range of its node that landed whole from RAM.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import Spool
import Synchronization
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

    /// A request of one 1 MiB file (one range) asked for on this node, with its sidecar, while
    /// this process stands for the node's supervisor.
    private func requestWithSidecar() throws -> (Handoff, SpoolRequest, sidecar: URL, job: String) {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 1 << 20])
        let env = environment()
        let settings = DownloadSettings.fromEnvironment(env)
        let handoff = try XCTUnwrap(Handoff(base: cacheBase, settings: settings, environment: env), "no hand-off")
        let spool = handoff.spool
        spool.heartbeat()  // this process stands for the node's supervisor
        let id = try RepoID(repo)
        let snapshot = try downloader().client.snapshot(of: id, revision: "main")
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: cacheBase, repo: id))
        let request = SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: directory.path,
                                   files: snapshot.files, node: settings.node)
        try spool.submit(request)
        let sidecar = StagingFile.sidecarURL("model.safetensors", in: directory)
        try FileManager.default.createDirectory(at: sidecar.deletingLastPathComponent(), withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: sidecar.path, contents: Data("{}".utf8)))
        let key = PlannedFile.key(modelDir: directory.path, path: "model.safetensors", commit: snapshot.commit)
        return (handoff, request, sidecar, PlannedFile.jobName(key: key, index: 0))
    }

    /// A progress waiter whose own node's workers fetch a range of its request (a herd: every node
    /// fetches its share) reads the sidecar on the shared looks' lengthening interval, not at every
    /// half-second tick: its node's bytes come from RAM.
    func testAWaiterWhoseNodeFetchesARangeDoesNotReadTheSidecarAtEveryTick() throws {
        let (handoff, request, sidecar, job) = try requestWithSidecar()
        let live = try XCTUnwrap(LiveProgress(spool: handoff.spool))
        let range = live.begin(job: job)
        range?.update(64 << 10)
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
        print("sidecar read \(reads) times in 16 ticks while this node fetched a range of the request")
        XCTAssertLessThanOrEqual(reads, 12, "16 ticks while this node fetched a range: the sidecar read on the lengthening interval")
        XCTAssertGreaterThanOrEqual(reads, 3, "and still read on it")
        range?.remove()
        handoff.spool.markDone(request.id)
        XCTAssertEqual(ended.wait(timeout: .now() + 20), .success, "the waiter ended on the done marker")
    }

    /// A range this node's worker published counts whole in its waiter's progress from RAM (the
    /// worker keeps its record, sized to the range, for `LiveProgress.landedSeconds`), though the
    /// sidecar does not list it yet and no look at the shared layer is due: the bytes shown do not
    /// stand still until the next shared look.
    func testARangeOfThisNodeThatLandedCountsWholeBeforeTheSidecarSaysSo() throws {
        let (handoff, request, _, job) = try requestWithSidecar()
        let live = try XCTUnwrap(LiveProgress(spool: handoff.spool))
        let range = try XCTUnwrap(live.begin(job: job))
        range.update(64 << 10)
        let shown = Mutex<[Int64]>([])
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? handoff.waitFor(request, timeout: 90, progress: { p in shown.withLock { $0.append(p.completedBytes) } })
            ended.signal()
        }
        waitUntil(timeout: 10) { shown.withLock { $0.contains(64 << 10) } }
        XCTAssertTrue(shown.withLock { $0.contains(64 << 10) }, "the range's bytes in flight shown: \(shown.withLock { $0 })")
        range.landed(length: 1 << 20)
        waitUntil(timeout: 3) { shown.withLock { $0.last == 1 << 20 } }
        XCTAssertEqual(shown.withLock { $0.last }, 1 << 20, "the landed range counted whole: \(shown.withLock { $0 })")
        range.remove()
        handoff.spool.markDone(request.id)
        XCTAssertEqual(ended.wait(timeout: .now() + 20), .success, "the waiter ended on the done marker")
    }

    /// A call handed to the daemon that was given no progress callback (`speech download -q`)
    /// reads no sidecar while it waits: only its request's markers.
    func testAHandedOverCallGivenNoProgressReadsNoSidecarWhileItWaits() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 1 << 20])
        let env = environment()
        let settings = DownloadSettings.fromEnvironment(env)
        let spool = try XCTUnwrap(Handoff(base: cacheBase, settings: settings, environment: env)).spool
        // This process stands for the node's supervisor: its record, and what it says it fetches.
        spool.heartbeat()
        RequestTargets.daemon(base: cacheBase, environment: env).publish(in: spool)
        EndpointPolicy.daemon(environment: env).publish(in: spool)
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: cacheBase, repo: try RepoID(repo)))
        let sidecar = StagingFile.sidecarURL("model.safetensors", in: directory)
        try FileManager.default.createDirectory(at: sidecar.deletingLastPathComponent(), withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: sidecar.path, contents: Data("{}".utf8)))
        let opens = try FolderOpenCounter(sidecar.deletingLastPathComponent().path)
        let ended = DispatchSemaphore(value: 0)
        let downloader = self.downloader()
        let (base, repo) = (cacheBase, self.repo)
        Thread.detachNewThread {
            _ = try? downloader.downloadBlocking(repo: repo, cacheBaseDir: base)
            ended.signal()
        }
        waitUntil(timeout: 20) { (try? FileManager.default.contentsOfDirectory(atPath: spool.layout.path(.requests)).isEmpty) == false }
        var reads = 0
        for _ in 0..<10 {
            usleep(400_000)
            reads += opens.take(entry: sidecar.lastPathComponent)
        }
        guard let id = spool.requests().first?.id else { return XCTFail("the call handed its request over") }
        spool.markDone(id)
        XCTAssertEqual(ended.wait(timeout: .now() + 20), .success, "the call ended on the done marker")
        XCTAssertEqual(reads, 0, "4 s of a wait given no progress: no sidecar read")
    }
}
