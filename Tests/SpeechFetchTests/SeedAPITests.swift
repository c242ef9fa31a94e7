// The seed library's names on Linux (docs/api.md): weightsExist's rules, downloadWeights offline
// and online, the stall guard on a wedged and on a growing transfer, and backgroundTransfer
// handing the bytes to speech-fetchd's workers, where a cancelled waiter only detaches.
import Daemon
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class SeedAPITests: DaemonTestCase {
    let repo = "org/Seed"
    var target: URL { temp.appendingPathComponent("app-models/seed") }

    override func tearDownWithError() throws {
        HuggingFaceDownloader.backgroundTransfer = nil
        HuggingFaceDownloader.shared = HuggingFaceDownloader(environment: [:])
        try super.tearDownWithError()
    }

    func useSharedDownloader(_ extra: [String: String] = [:]) {
        var env = environment(extra: extra)
        env["QWEN3_CACHE_DIR"] = cacheBase.path
        env["SPEECH_FETCHD"] = fetchdBinary.path
        HuggingFaceDownloader.shared = HuggingFaceDownloader(environment: env)
    }

    func write(_ relative: String, _ text: String = "x") throws {
        let url = target.appendingPathComponent(relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    func testPartialShardSetIsNotExistingAndUnrelatedFilesDoNotCount() throws {
        try write("config.json")
        try write("README.md")
        XCTAssertFalse(HuggingFaceDownloader.weightsExist(in: target), "config and README are not weights")
        try write("model.safetensors.index.json",
                  #"{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}"#)
        try write("model-00002-of-00002.safetensors")
        XCTAssertFalse(HuggingFaceDownloader.weightsExist(in: target), "one shard of two")
        try write("model-00001-of-00002.safetensors")
        XCTAssertTrue(HuggingFaceDownloader.weightsExist(in: target))
        try write("text/model.safetensors.index.json", #"{"weight_map": {"c": "text/model-1.safetensors"}}"#)
        XCTAssertFalse(HuggingFaceDownloader.weightsExist(in: target), "every index's shard set counts")
    }

    func testCoreMLBundleOnlyCacheSatisfiesOfflineModeWithoutARequest() async throws {
        try write("encoder.mlmodelc/coremldata.bin")
        try write("vocab.json")
        useSharedDownloader()
        let fractions = FractionLog()
        try await HuggingFaceDownloader.downloadWeights(modelId: repo, to: target, offlineMode: true,
                                                        progressHandler: { fractions.add($0) })
        XCTAssertEqual(fractions.all, [1.0])
        XCTAssertEqual(hub.totalRequests, 0)
        let bundle = temp.appendingPathComponent("pkg")
        try FileManager.default.createDirectory(at: bundle.appendingPathComponent("decoder.mlpackage"), withIntermediateDirectories: true)
        XCTAssertTrue(HuggingFaceDownloader.weightsExist(in: bundle))
    }

    func testOfflineMissFailsNamingTheDirectory() async throws {
        try write("config.json")
        useSharedDownloader()
        do {
            try await HuggingFaceDownloader.downloadWeights(modelId: repo, to: target, offlineMode: true)
            XCTFail("a cache without weights must not satisfy offline mode")
        } catch {
            XCTAssertTrue("\(error)".contains(target.path), "\(error)")
        }
        XCTAssertEqual(hub.totalRequests, 0)
    }

    func testDownloadWeightsFetchesConfigAndWeightsAndSkipsWhatTheRepoLacks() async throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 600_000, "other.bin": 1000])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{}".utf8)])
        useSharedDownloader()
        try await HuggingFaceDownloader.downloadWeights(modelId: repo, to: target, additionalFiles: ["tokenizer.json"])
        XCTAssertTrue(HuggingFaceDownloader.weightsExist(in: target))
        let files = try FileManager.default.contentsOfDirectory(atPath: target.path).filter { !$0.hasPrefix(".") }.sorted()
        XCTAssertEqual(files, ["config.json", "model.safetensors"], "no other.bin; a missing tokenizer.json is skipped")
    }

    func testStallGuardFiresOnAWedgedTransfer() async throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 2 << 20])
        hub.setFault(.stall(afterBytes: 100_000, seconds: 6, times: 40), for: "\(repo)/model.safetensors")
        useSharedDownloader(["HF_DOWNLOAD_STALL_TIMEOUT": "60"])  // the engine's own guard stays out of the way
        let downloader = HuggingFaceDownloader.shared
        let directory = target
        let modelId = repo
        let started = Date()
        do {
            try await HuggingFaceDownloader.withDownloadStallGuard(modelId: repo, stallTimeoutSeconds: 1) { tick in
                _ = try await downloader.downloadWithResult(repo: modelId, cacheDir: directory, host: .embedded,
                                                            progress: { tick($0.fraction) })
            }
            XCTFail("a wedged transfer must stall")
        } catch DownloadError.stalled(let modelId, let seconds) {
            XCTAssertEqual(modelId, repo)
            XCTAssertEqual(seconds, 1)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 6, "stopped by the guard, not by the fault ending")
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.appendingPathComponent("model.safetensors").path))
    }

    func testStallGuardLetsATransferWhoseStagedBytesGrowFinish() async throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 3 << 20])
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: "\(repo)/model.safetensors")  // ~3 s in all
        useSharedDownloader()
        let downloader = HuggingFaceDownloader.shared
        let directory = target
        let modelId = repo
        let started = Date()
        try await HuggingFaceDownloader.withDownloadStallGuard(modelId: repo, stallTimeoutSeconds: 1) { tick in
            _ = try await downloader.downloadWithResult(repo: modelId, cacheDir: directory, host: .embedded,
                                                        progress: { tick($0.fraction) })
        }
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 1.5, "the transfer outlasted the guard's window")
        XCTAssertEqual(try Data(contentsOf: target.appendingPathComponent("model.safetensors")),
                       try source(repo, "model.safetensors"))
    }

    func testBackgroundTransferIsFetchedBySpeechFetchdAndACancelledWaiterOnlyDetaches() async throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 4 << 20])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{}".utf8)])
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: "\(repo)/model.safetensors")
        useSharedDownloader()
        HuggingFaceDownloader.backgroundTransfer = BackgroundTransferConfiguration(sessionIdentifier: "com.example.models")
        XCTAssertEqual(HuggingFaceDownloader.backgroundTransfer?.resourceTimeout, 24 * 60 * 60)
        XCTAssertEqual(HuggingFaceDownloader.backgroundTransfer?.isDiscretionary, false)

        let modelId = repo
        let directory = target
        let waiter = Task { try await HuggingFaceDownloader.downloadWeights(modelId: modelId, to: directory) }
        var claimants = Set<pid_t>()
        XCTAssertTrue(waitUntil(timeout: 20) {
            for entry in self.names("jobs/claimed") {
                if let pid = entry.split(separator: "@").last.flatMap({ pid_t($0) }) { claimants.insert(pid) }
            }
            return !claimants.isEmpty
        }, "speech-fetchd's workers claim the ranges")
        if let daemon = supervisorPid() { adoptStranger(daemon) }
        XCTAssertFalse(claimants.contains(getpid()), "the bytes are fetched by other processes: \(claimants)")
        XCTAssertNotNil(supervisorPid(), "a speech-fetchd was started for the cache base")

        waiter.cancel()
        let outcome = await waiter.result
        XCTAssertThrowsError(try outcome.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.appendingPathComponent("model.safetensors").path),
                       "the waiter left before the transfer ended")
        XCTAssertTrue(waitUntil(timeout: 30, interval: 0.05) {
            FileManager.default.fileExists(atPath: self.target.appendingPathComponent("model.safetensors").path)
        }, "the transfer went on without its waiter")
        XCTAssertEqual(try Data(contentsOf: target.appendingPathComponent("model.safetensors")),
                       try source(repo, "model.safetensors"))

        let answered = FractionLog()
        HuggingFaceDownloader.handleBackgroundSessionEvents(identifier: "com.example.models") { answered.add(1) }
        XCTAssertEqual(answered.all, [1], "answered at once")
    }
}

extension SeedAPITests {
    func testResourceTimeoutBoundsTheWaitForADaemonHostedRequest() async throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 4 << 20])
        hub.setFault(.rateLimit(bytesPerSecond: 64 << 10), for: "\(repo)/model.safetensors")  // several seconds
        useSharedDownloader()
        HuggingFaceDownloader.backgroundTransfer = BackgroundTransferConfiguration(sessionIdentifier: "t", resourceTimeout: 1)
        let started = Date()
        do {
            try await HuggingFaceDownloader.downloadWeights(modelId: repo, to: target)
            XCTFail("the request outlasts its resource timeout")
        } catch HandoffError.timedOut(let repo) {
            XCTAssertEqual(repo, self.repo)
        }
        if let daemon = supervisorPid() { adoptStranger(daemon) }
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        XCTAssertFalse(names("requests").isEmpty, "the request stays for speech-fetchd")
    }
}

/// Progress fractions reported from any thread.
final class FractionLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Double] = []
    func add(_ v: Double) { lock.withLock { values.append(v) } }
    var all: [Double] { lock.withLock { values } }
}
