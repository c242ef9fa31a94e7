// Offline mode, the narrow unreachable-Hub fallback, and resume state that must not be misread.
import Digest
import Foundation
import HubClient
import HubTypes
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class OfflineTests: HubTestCase {
    let repo = "org/Cached"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: [
            "model-00001-of-00002.safetensors": 1_100_000, "model-00002-of-00002.safetensors": 900_000,
        ])
        try TestHub.writeRepo(root: root, repo: repo, files: [
            "model.safetensors.index.json": Data("""
            {"weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}}
            """.utf8),
            "tokenizer.json": Data("{\"vocab\": {}}".utf8),
        ])
    }

    func testOfflineWithCompleteCacheMakesNoRequestAtAll() throws {
        try download(repo)
        hub.resetCounters()
        let result = try download(repo, offline: true)
        XCTAssertEqual(hub.totalRequests, 0)
        XCTAssertEqual(Set(result.files), ["model.safetensors.index.json", "tokenizer.json",
                                           "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])
        // HF_HUB_OFFLINE=1 is the default for offlineMode.
        try download(repo, extra: ["HF_HUB_OFFLINE": "1"])
        XCTAssertEqual(hub.totalRequests, 0)
    }

    func testOfflineMissNamesTheDirectoryAndTheMissingShard() throws {
        try download(repo)
        let shard = modelDir(repo).appendingPathComponent("model-00002-of-00002.safetensors")
        try FileManager.default.removeItem(at: shard)
        hub.resetCounters()
        XCTAssertThrowsError(try download(repo, offline: true)) { error in
            guard case CacheError.cacheMiss(_, let directory, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, ["model-00002-of-00002.safetensors"])
            XCTAssertTrue(directory.hasSuffix("models/org/Cached"))
            XCTAssertTrue("\(error)".contains(directory))
        }
        XCTAssertEqual(hub.totalRequests, 0)
    }

    func testOfflineSeesAnotherFileOfTheSameSizeOrASymlinkAsMissing() throws {
        try download(repo)
        let dir = modelDir(repo)
        // Another commit's bytes of the same size carry another content id.
        let shard = dir.appendingPathComponent("model-00001-of-00002.safetensors").path
        let fd = open(shard, O_RDWR)
        XCTAssertGreaterThanOrEqual(fd, 0)
        ModelDirectory.recordContentID(RepoFile(path: "x", size: 1, blobID: "0", sha256: String(repeating: "0", count: 64)), fd: fd)
        close(fd)
        // A symlink to a copy is not the file the cache finalized.
        let tokenizer = dir.appendingPathComponent("tokenizer.json").path
        try FileManager.default.moveItem(atPath: tokenizer, toPath: tokenizer + ".elsewhere")
        try FileManager.default.createSymbolicLink(atPath: tokenizer, withDestinationPath: tokenizer + ".elsewhere")
        hub.resetCounters()
        XCTAssertThrowsError(try download(repo, offline: true)) { error in
            guard case CacheError.cacheMiss(_, _, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, ["model-00001-of-00002.safetensors", "tokenizer.json"])
        }
        XCTAssertEqual(hub.totalRequests, 0)
    }

    func testOfflineWithNothingCachedIsACacheMiss() throws {
        XCTAssertThrowsError(try download(repo, offline: true)) { error in
            guard case CacheError.cacheMiss = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(hub.totalRequests, 0)
    }

    func testOfflineBundleWithoutManifestIsJudgedByItsFiles() throws {
        // An app ships files it copied itself: no manifest, just the files.
        let bundle = temp.appendingPathComponent("bundle")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: bundle.appendingPathComponent("config.json"))
        let d = downloader()
        XCTAssertNoThrow(try d.downloadBlocking(repo: repo, include: ["config.json"], cacheDir: bundle, offlineMode: true))
        XCTAssertThrowsError(try d.downloadBlocking(repo: repo, include: ["*.safetensors"], cacheDir: bundle, offlineMode: true))
        XCTAssertEqual(hub.totalRequests, 0)
    }

    func testUnreachableHubFallsBackToACompleteCacheQuickly() throws {
        try download(repo)
        let started = Date()
        let result = try download(repo, extra: ["SPEECH_FETCH_RETRY_DELAYS": "5"], endpoint: deadEndpoint())
        XCTAssertLessThan(Date().timeIntervalSince(started), 3, "a satisfied cache does not sit through the retry ladder")
        XCTAssertNotNil(result.warning)
        XCTAssertEqual(result.fetched, [])
    }

    func testUnreachableHubWithIncompleteCacheSaysWhatIsMissing() throws {
        try download(repo)
        try FileManager.default.removeItem(at: modelDir(repo).appendingPathComponent("tokenizer.json"))
        XCTAssertThrowsError(try download(repo, extra: ["SPEECH_FETCH_RETRY_ATTEMPTS": "2"], endpoint: deadEndpoint())) { error in
            guard case DownloadError.hubUnreachable(_, _, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, ["tokenizer.json"])
        }
    }

    /// A repo of which nothing is cached lacks "any file": a case of `MissingFiles`, not a marker
    /// string inside the list, and the message says so in words.
    func testAMissOfARepoOfWhichNothingIsCachedIsAnyFileNotANamedList() throws {
        XCTAssertThrowsError(try download(repo, offline: true)) { error in
            guard case CacheError.cacheMiss(_, _, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, .anyFile)
            XCTAssertEqual(missing.paths, [])
            XCTAssertTrue("\(error)".contains("nothing of it is in the cache"), "\(error)")
            XCTAssertFalse("\(error)".contains("(any file)"), "\(error)")
        }
        XCTAssertThrowsError(try download(repo, include: ["config.json"], offline: true)) { error in
            guard case CacheError.cacheMiss(_, _, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, .named(["config.json"]))
            XCTAssertTrue("\(error)".contains("missing: config.json"), "\(error)")
        }
        XCTAssertThrowsError(try download(repo, extra: ["SPEECH_FETCH_RETRY_ATTEMPTS": "1"], endpoint: deadEndpoint())) { error in
            guard case DownloadError.hubUnreachable(_, _, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, .anyFile)
            XCTAssertTrue("\(error)".contains("nothing of it is in the cache"), "\(error)")
        }
    }

    func testAnAwaitedCallWithNoHubThereAndNothingCachedFailsAtOnceNamingTheEndpointAndOfflineMode() async throws {
        // A Swift caller's `try await` under the user's ladder (5 attempts, seconds apart): a
        // refused connection and a name that never resolves (RFC 2606) fail without walking it.
        for endpoint in [deadEndpoint(), "http://hub.invalid"] {
            let started = Date()
            do {
                _ = try await downloader(["SPEECH_FETCH_RETRY_ATTEMPTS": "5", "SPEECH_FETCH_RETRY_DELAYS": "5"], endpoint: endpoint)
                    .download(repo: repo, cacheBaseDir: cacheBase)
                XCTFail("\(endpoint): the call succeeded with no Hub there")
            } catch {
                let took = Date().timeIntervalSince(started)
                print("try await download with \(endpoint): threw after \(String(format: "%.2f", took)) s")
                XCTAssertLessThan(took, 4, "\(endpoint): nothing there at first contact fails without the retry ladder: \(error)")
                guard case DownloadError.hubUnreachable(_, _, .anyFile, _) = error else {
                    XCTFail("\(endpoint): the Hub unreachable with nothing cached: \(error)"); continue
                }
                let said = "\(error)"
                XCTAssertTrue(said.contains(endpoint) && said.contains("HF_HUB_OFFLINE"), "names the endpoint and offline mode: \(said)")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).path), "nothing written for a call that reached no Hub")
    }

    func testAnHTTPAnswerIsNotAnOutage() throws {
        try download(repo)
        // The same model directory, asked for under a repo id the Hub does not have: 404 must fail.
        let other = try HuggingFaceDownloader(environment: environment())
            .downloadBlocking(repo: repo, cacheBaseDir: cacheBase)
        XCTAssertNil(other.warning)
        XCTAssertThrowsError(try downloader().downloadBlocking(repo: "org/Gone", cacheDir: modelDir(repo))) { error in
            guard case HubError.repoNotFound = error else { return XCTFail("\(error)") }
        }
    }
}
