// speech-fetchd --max-cache-size with real processes and files: the daemon evicts the least
// recently used model after a request of its node finished, and keeps a pinned one.
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class CacheCapTests: DaemonTestCase {
    /// The model's use record, manifest and folder `hours` old: last used that long ago.
    func age(_ directory: ModelDirectory, hours: Double) {
        directory.noteUse()
        let t = Date().timeIntervalSince1970 - hours * 3600
        for path in [directory.useMarkerPath, directory.path + "/" + ModelLayout.manifest, directory.path] {
            var times = [timespec(tv_sec: Int(t), tv_nsec: 0), timespec(tv_sec: Int(t), tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW), 0, path)
        }
    }

    func testDaemonEvictsTheLeastRecentlyUsedModelAfterARequestFinishes() throws {
        for repo in ["org/Old", "org/Pinned", "org/New"] {
            try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 1 << 20])
        }
        try download("org/Old")
        try download("org/Pinned")
        let old = ModelDirectory(modelDir("org/Old"))
        age(old, hours: 5)
        age(ModelDirectory(modelDir("org/Pinned")), hours: 9)
        try speech(["cache", "pin", "org/Pinned", "--cache-base", cacheBase.path]).process.waitUntilExit()
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheBase.path + "/pins/org/Pinned"))

        // 2.5 MiB: the two models fit, and the daemon's first look evicts nothing. A third does not.
        let daemon = try startDaemon(workers: 1, slots: 2, extra: ["SPEECH_FETCH_PRUNE_SECONDS": "3600"],
                                     arguments: ["--max-cache-size", "2560K"])
        let result = try download("org/New")
        XCTAssertTrue(result.handedOver)
        let evicted = waitUntil(timeout: 15) { !FileManager.default.fileExists(atPath: old.path) }
        XCTAssertTrue(evicted, "the least recently used model is evicted; log:\n\(contents(daemon.log))")
        waitUntil(timeout: 5) { self.contents(daemon.log).contains("evicted org/Old") }
        XCTAssertTrue(contents(daemon.log).contains("evicted org/Old"), contents(daemon.log))
        XCTAssertFalse(contents(daemon.log).contains("evicted org/Pinned"), contents(daemon.log))
        XCTAssertTrue(FileManager.default.fileExists(atPath: modelDir("org/Pinned").path + "/model.safetensors"), "pinned")
        XCTAssertTrue(FileManager.default.fileExists(atPath: modelDir("org/New").path + "/model.safetensors"), "just used")
        // A local disk: no other node can be reading it, so its bytes are freed at once.
        let waiting = (try? FileManager.default.contentsOfDirectory(atPath: cacheBase.path + "/models/.evicted")) ?? []
        XCTAssertEqual(waiting, [], "deleted at once on a local disk")
        XCTAssertTrue(contents(daemon.log).contains("evicted org/Old") && contents(daemon.log).contains("; deleted"), contents(daemon.log))
    }

    /// A model that grew without the daemon (an embedded download, files put there by hand) is
    /// evicted by the timed pass.
    func testDaemonEvictsOnItsTimerWhatGrewWithoutIt() throws {
        let daemon = try startDaemon(workers: 1, slots: 1, extra: ["SPEECH_FETCH_PRUNE_SECONDS": "1"],
                                     arguments: ["--max-cache-size", "64K", "--cache-grace", "0"])
        let directory = ModelDirectory(modelDir("org/Grown"))
        let data = Data(repeating: 7, count: 200_000)
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        try data.write(to: directory.finalURL("weights.bin"))
        try directory.writeManifest(RepoSnapshot(repo: "org/Grown", revision: "main", commit: String(repeating: "a", count: 40),
                                                 files: [RepoFile(path: "weights.bin", size: 200_000, blobID: String(repeating: "b", count: 40), sha256: nil)]))
        age(directory, hours: 2)
        let evicted = waitUntil(timeout: 15) { !FileManager.default.fileExists(atPath: directory.path) }
        XCTAssertTrue(evicted, "the timed pass evicts it; log:\n\(contents(daemon.log))")
        waitUntil(timeout: 5) { self.contents(daemon.log).contains("evicted org/Grown") }
        XCTAssertTrue(contents(daemon.log).contains("evicted org/Grown"), contents(daemon.log))
        // Evicted on a local disk, its folder does not stay in models/.evicted/.
        let deleted = waitUntil(timeout: 15) {
            ((try? FileManager.default.contentsOfDirectory(atPath: self.cacheBase.path + "/models/.evicted")) ?? []).isEmpty
        }
        XCTAssertTrue(deleted, "deleted after the grace period; log:\n\(contents(daemon.log))")
    }
}
