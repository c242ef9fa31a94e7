// What a huggingface_hub cache holds for a repo that publishes shards, their index and a
// consolidated copy: the whole selection, as `hf download` fetches it, because huggingface_hub
// checks a snapshot against `trees/<commit>.json` (docs/cache-and-offline.md).
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class HubCacheFileSetTests: HubTestCase {
    let repo = "org/Both"
    let shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: [
            shards[0]: 300_000, shards[1]: 200_000, "model.safetensors": 500_000,
        ])
        try TestHub.writeRepo(root: root, repo: repo, files: [
            "model.safetensors.index.json": Data("""
            {"weight_map": {"x": "\(shards[0])", "y": "\(shards[1])"}}
            """.utf8),
            "config.json": Data("{}".utf8),
        ])
    }

    var hubCache: URL { temp.appendingPathComponent("hf") }

    func testTheHubCacheGetsTheConsolidatedCopyTooAsHfDownloadDoes() throws {
        let result = try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase, huggingFaceCache: hubCache)
        XCTAssertEqual(Set(result.files), Set(shards + ["model.safetensors", "model.safetensors.index.json", "config.json"]))
        let snapshot = result.directory
        for path in result.files {
            XCTAssertEqual(try Data(contentsOf: snapshot.appendingPathComponent(path)), try source(repo, path), path)
        }
        // Offline with no pattern: complete (huggingface_hub's snapshot_download asks the same).
        hub.resetCounters()
        let offline = try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase, huggingFaceCache: hubCache,
                                                        offlineMode: true)
        XCTAssertEqual(hub.totalRequests, 0)
        XCTAssertEqual(Set(offline.files), Set(result.files))
    }

    func testTheNativeLayoutStillSkipsTheCopyTheIndexDoesNotName() throws {
        let result = try download(repo)
        XCTAssertFalse(result.files.contains("model.safetensors"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("model.safetensors").path))
    }

    func testAnExcludeNarrowsTheHubCacheAndAnOfflineCallWithoutItReportsTheCopyMissing() throws {
        let result = try downloader().downloadBlocking(repo: repo, exclude: ["model.safetensors"], cacheBaseDir: cacheBase,
                                                       huggingFaceCache: hubCache)
        XCTAssertFalse(result.files.contains("model.safetensors"))
        XCTAssertThrowsError(try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase, huggingFaceCache: hubCache,
                                                               offlineMode: true)) { error in
            guard case CacheError.cacheMiss(_, _, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, ["model.safetensors"])
        }
        // The same exclusion offline finds it complete.
        XCTAssertNoThrow(try downloader().downloadBlocking(repo: repo, exclude: ["model.safetensors"], cacheBaseDir: cacheBase,
                                                           huggingFaceCache: hubCache, offlineMode: true))
    }
}
