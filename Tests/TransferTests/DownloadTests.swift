// The download engine against the test Hub over real HTTP: layout, ranges, shards, resume, skips.
import Digest
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class DownloadTests: HubTestCase {
    let repo = "org/Model"

    func makeRepo() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [
            "model.safetensors": 3 << 20 + 12345,  // ranged: 13 ranges of 256 KiB
            "weights/extra.bin": 300_000,           // small LFS file
        ])
        try TestHub.writeRepo(root: root, repo: repo, files: [
            "config.json": Data("{\"a\": 1}".utf8),
            "tokenizer/vocab.json": Data("{\"hello\": 0}".utf8),
            "empty.txt": Data(),
        ])
    }

    func testAFinishedDownloadKeepsNoFileOfTheCacheOpen() throws {
        // An app calls download many times in one process: nothing of a finished run (a staging
        // file, a sidecar) may stay open, even after a cut connection made a range try again.
        try makeRepo()
        hub.setFault(.dropConnection(afterBytes: 100_000, times: 2), for: "\(repo)/model.safetensors")
        try download(repo)
        let cache = cacheBase.resolvingSymlinksInPath().path
        let open = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")
        }.filter { $0.hasPrefix(cache) }
        XCTAssertEqual(open, [], "descriptors left open in the cache")
    }

    func testDownloadPlacesVerifiedFilesAndRemovesStaging() throws {
        try makeRepo()
        let log = ProgressLog()
        let result = try download(repo, progress: { log.add($0) })
        XCTAssertEqual(result.directory.standardizedFileURL.path, modelDir(repo).standardizedFileURL.path)
        XCTAssertEqual(Set(result.files), ["model.safetensors", "weights/extra.bin", "config.json", "tokenizer/vocab.json", "empty.txt"])
        for path in result.files { try assertSameBytes(repo, path) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(".incomplete").path),
                       ".incomplete/ must be removed once empty")
        // Byte-weighted progress over the whole set: monotonic, ends at the total.
        let events = log.all
        XCTAssertFalse(events.isEmpty)
        XCTAssertEqual(events.map(\.completedBytes), events.map(\.completedBytes).sorted())
        let large: Int64 = (3 << 20) + 12345
        let total: Int64 = large + 300_000 + 8 + 12
        XCTAssertEqual(events.last?.totalBytes, total)
        XCTAssertEqual(events.last?.completedBytes, total)
        XCTAssertEqual(events.last?.filesDone, 5)
        XCTAssertEqual(Set(events.compactMap(\.completedFile)), ["model.safetensors", "weights/extra.bin", "config.json", "tokenizer/vocab.json"])
    }

    func testLargeFileTransfersAsRangesEachByteServedOnce() throws {
        try makeRepo()
        try download(repo, include: ["model.safetensors"])
        let file = "\(repo)/model.safetensors"
        let ranges = hub.servedRanges(for: file)
        XCTAssertEqual(ranges.count, 13, "3 MiB + 12345 B in 256 KiB ranges")
        XCTAssertEqual(hub.bodyBytes(for: file), (3 << 20) + 12345)
        XCTAssertEqual(overlap(ranges), 0)
        try assertSameBytes(repo, "model.safetensors")
    }

    func testResolutionHappensOnceAndEveryByteComesFromThatCommit() throws {
        try makeRepo()
        try download(repo)
        let log = hub.requestLog()
        XCTAssertEqual(log.filter { $0.contains("/revision/") }.count, 1, "\(log)")
        XCTAssertEqual(log.filter { $0.contains("/tree/") }.count, 1)
        let commit = try XCTUnwrap(ModelDirectory(modelDir(repo)).readManifest()?.commit)
        for line in log where line.contains("/resolve/") || line.contains("/cdn/") {
            XCTAssertTrue(line.contains(commit), "every file request is pinned to the commit: \(line)")
            XCTAssertFalse(line.contains("/main/"), line)
        }
    }

    func testCompleteFilesAreSkippedWithoutRehashing() throws {
        try makeRepo()
        try download(repo)
        hub.resetCounters()
        let second = try download(repo)
        XCTAssertEqual(second.fetched, [])
        let log = hub.requestLog()
        XCTAssertEqual(log.count, 2, "only the revision and the tree: \(log)")
    }

    func testShardIndexDecidesWhichWeightsAreFetched() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [
            "model-00001-of-00002.safetensors": 1_500_000,
            "model-00002-of-00002.safetensors": 1_200_000,
            "model.safetensors": 2_700_000,
        ])
        try TestHub.writeRepo(root: root, repo: repo, files: [
            "model.safetensors.index.json": Data("""
            {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}}
            """.utf8),
            "config.json": Data("{}".utf8),
        ])
        let result = try download(repo, include: ["model.safetensors.index.json", "config.json"])
        XCTAssertEqual(Set(result.files), ["model.safetensors.index.json", "config.json",
                                           "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])
        XCTAssertEqual(hub.requests(for: "\(repo)/model.safetensors"), 0, "the consolidated copy is never fetched")
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("model.safetensors").path))
        // Selecting everything still leaves the consolidated copy out.
        let all = try download(repo)
        XCTAssertFalse(all.files.contains("model.safetensors"))
        XCTAssertEqual(hub.requests(for: "\(repo)/model.safetensors"), 0)
    }

    func testSwitchingEndpointReusesTheCache() throws {
        try makeRepo()
        try download(repo)
        let mirror = try TestHub(root: root)
        defer { mirror.stop() }
        let again = try download(repo, endpoint: mirror.baseURL + "/")
        XCTAssertEqual(again.fetched, [])
        XCTAssertEqual(mirror.requestLog().count, 2)
    }

    func testAsyncDownloadReturnsTheModelDirectory() async throws {
        try makeRepo()
        let dir = try await downloader().download(repo: repo, include: ["config.json"], cacheBaseDir: cacheBase)
        XCTAssertEqual(dir.standardizedFileURL.path, modelDir(repo).standardizedFileURL.path)
        let cacheDir = temp.appendingPathComponent("own-dir")
        let own = try await downloader().download(repo: repo, include: ["config.json"], cacheDir: cacheDir)
        XCTAssertEqual(own.standardizedFileURL.path, cacheDir.standardizedFileURL.path)
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheDir.appendingPathComponent("config.json").path))
    }

    func testDefaultCacheBaseFollowsTheEnvironment() {
        XCTAssertEqual(CacheLocation.defaultBase(["QWEN3_CACHE_DIR": "/data/models", "HOME": "/h"]).path, "/data/models")
        XCTAssertEqual(CacheLocation.defaultBase(["XDG_CACHE_HOME": "/xdg", "HOME": "/h"]).path, "/xdg/qwen3-speech")
        XCTAssertEqual(CacheLocation.defaultBase(["HOME": "/h"]).path, "/h/.cache/qwen3-speech")
    }

    func testSettingsComeFromTheEnvironmentWithCaps() {
        let s = DownloadSettings.fromEnvironment(["HF_DOWNLOAD_RANGE_CONCURRENCY": "64", "HF_DOWNLOAD_RANGE_CHUNK": "100000",
                                                  "HF_DOWNLOAD_RANGE_THRESHOLD": "5", "HF_DOWNLOAD_STALL_TIMEOUT": "7",
                                                  "SPEECH_FETCH_RETRY_DELAYS": "1,2"])
        XCTAssertEqual(s.concurrency, 16)
        XCTAssertEqual(s.rangeSize % 65536, 0)
        XCTAssertEqual(s.rangeSize, 131072)
        XCTAssertEqual(s.rangeThreshold, 5)
        XCTAssertEqual(s.stallTimeout, 7)
        XCTAssertEqual(s.retry.delays, [1, 2])
        let d = DownloadSettings.fromEnvironment([:])
        XCTAssertEqual([d.rangeSize, d.rangeThreshold], [8 << 20, 8 << 20])
        XCTAssertEqual(d.concurrency, 16)
        XCTAssertEqual(d.stallTimeout, 300)
        XCTAssertEqual(d.retry.delays, [5, 15, 30, 60])
        XCTAssertEqual(d.retry.attempts, 5)
    }

    func testReexportedFileOfTheSameSizeIsFetchedAgain() throws {
        try makeRepo()
        try download(repo, include: ["model.safetensors"])
        // The repo is re-exported: same size, new bytes (a new commit).
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": (3 << 20) + 12345], seed: 7)
        hub.resetCounters()
        let again = try download(repo, include: ["model.safetensors"])
        XCTAssertEqual(again.fetched, ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
    }

    func testAFailedCallLeavesNoLockThatBlocksTheNextCallInTheSameProcess() throws {
        try makeRepo()
        hub.setFault(.status(code: 404, times: 1, retryAfter: nil), for: "\(repo)/model.safetensors")
        XCTAssertThrowsError(try download(repo, include: ["model.safetensors"]))
        let started = Date()
        try download(repo, include: ["model.safetensors"])
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        try assertSameBytes(repo, "model.safetensors")
    }

    func testTheNFCAndNFDSpellingsOfOneNameAreTwoFilesBothDownloaded() throws {
        // `é` as one scalar (NFC) and as `e` + a combining acute (NFD): equal Swift strings,
        // different bytes, so two files to the Hub, git and the disk (huggingface_hub fetches both).
        let nfc = "caf\u{E9}.txt", nfd = "cafe\u{301}.txt"
        let nfcWeights = "voix/\u{E9}t\u{E9}.bin", nfdWeights = "voix/e\u{301}te\u{301}.bin"
        XCTAssertEqual(nfc, nfd, "Swift takes them for one name")
        XCTAssertNotEqual(Array(nfc.utf8), Array(nfd.utf8))
        try TestHub.writeRepo(root: root, repo: repo, files: [nfc: Data("composed\n".utf8)])
        try TestHub.writeRepo(root: root, repo: repo, files: [nfd: Data("decomposed, longer\n".utf8)])
        try TestHub.generateRepo(root: root, repo: repo, files: [nfcWeights: (1 << 20) + 4321], seed: 1)  // ranged
        try TestHub.generateRepo(root: root, repo: repo, files: [nfdWeights: (1 << 20) + 4321], seed: 2)
        let result = try download(repo)
        XCTAssertEqual(result.files.count, 4, "\(result.files)")
        for path in [nfc, nfd, nfcWeights, nfdWeights] {
            let got = FileManager.default.contents(atPath: modelDir(repo).path + "/" + path)
            let served = FileManager.default.contents(atPath: root.path + "/" + repo + "/" + path)
            XCTAssertNotNil(got, "\(Array(path.utf8)) is on disk")
            XCTAssertEqual(got.map { SHA256.hex(of: $0) }, served.map { SHA256.hex(of: $0) }, "\(Array(path.utf8)) is byte-identical to the Hub's")
        }
        // Each is current as it is: a second call fetches nothing.
        hub.resetCounters()
        XCTAssertEqual(try download(repo).fetched, [])
    }

    func testAnUnreadableMaxRateVariableFailsTheCallNamingItAndWritesNothing() throws {
        try makeRepo()
        XCTAssertThrowsError(try download(repo, extra: ["SPEECH_FETCH_MAX_RATE": "20MB"])) { error in
            XCTAssertEqual((error as? InvalidSetting)?.variable, "SPEECH_FETCH_MAX_RATE", "\(error)")
            XCTAssertTrue("\(error)".contains("'20MB'") && "\(error)".contains("like 500K or 20M"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).path), "nothing was written")
        XCTAssertEqual(hub.requestLog(), [], "nothing was asked of the Hub")
        try download(repo, extra: ["SPEECH_FETCH_MAX_RATE": "100M"])
        try assertSameBytes(repo, "config.json")
    }
}
