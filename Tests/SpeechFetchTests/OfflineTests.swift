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

    /// An endpoint nobody listens on: connections are refused (a transport failure).
    func deadEndpoint() -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        close(fd)
        return "http://127.0.0.1:\(UInt16(bigEndian: addr.sin_port))"
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

    func testSidecarOfAnotherCommitIsDiscardedNotMisread() throws {
        // A staged file whose sidecar names another commit: its bytes must not be trusted.
        let dir = ModelDirectory(modelDir(repo))
        let staging = dir.stagingDirectory
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        let path = "model-00001-of-00002.safetensors"
        let bogus = Data(repeating: 0x41, count: 1_100_000)
        try bogus.write(to: staging.appendingPathComponent(path))
        let sha = SHA256.hex(of: try source(repo, path))
        let sidecar = Sidecar(path: path, size: 1_100_000, rangeSize: 256 << 10, commit: String(repeating: "0", count: 40),
                              etag: sha, sha256: sha, done: [0, 1, 2, 3, 4], hashedBytes: 0, hashState: nil)
        try JSONEncoder().encode(sidecar).write(to: staging.appendingPathComponent(path + ".sidecar.json"))
        try download(repo)
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), 1_100_000, "every byte fetched again")
    }

    func testResumeKeepsDoneRangesOfAMatchingSidecar() throws {
        try download(repo)
        let commit = try XCTUnwrap(ModelDirectory(modelDir(repo)).readManifest()?.commit)
        let path = "model-00001-of-00002.safetensors"
        let data = try source(repo, path)
        // Stage the first two ranges as a crashed run would have left them, then remove the final file.
        try FileManager.default.removeItem(at: modelDir(repo).appendingPathComponent(path))
        let staging = ModelDirectory(modelDir(repo)).stagingDirectory
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        var partial = Data(count: data.count)
        partial.replaceSubrange(0..<(512 << 10), with: data.prefix(512 << 10))
        try partial.write(to: staging.appendingPathComponent(path))
        let sha = SHA256.hex(of: data)
        let sidecar = Sidecar(path: path, size: Int64(data.count), rangeSize: 256 << 10, commit: commit,
                              etag: sha, sha256: sha, done: [0, 1], hashedBytes: 0, hashState: nil)
        try JSONEncoder().encode(sidecar).write(to: staging.appendingPathComponent(path + ".sidecar.json"))
        hub.resetCounters()
        try download(repo)
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), data.count - (512 << 10), "done ranges are not fetched again")
    }

    /// Partial-range resume (issue 14): a range's recorded `partial` bytes are kept, and asked
    /// for no more, in the boot that recorded them unsynced or when synced (no `partialBoot`);
    /// another boot's unsynced record is ignored (after a power loss those bytes may be garbage).
    func testResumeKeepsPartialRangesOnlyFromThisBootOrSynced() throws {
        try download(repo)
        let commit = try XCTUnwrap(ModelDirectory(modelDir(repo)).readManifest()?.commit)
        let path = "model-00001-of-00002.safetensors"
        let data = try source(repo, path)
        let thisBoot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let kept = 100_000
        for (boot, trusted) in [(nil, true), (thisBoot, true), ("00000000-0000-0000-0000-000000000000", false)] as [(String?, Bool)] {
            try FileManager.default.removeItem(at: modelDir(repo).appendingPathComponent(path))
            let staging = ModelDirectory(modelDir(repo)).stagingDirectory
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            // Range 0 done, range 1's first bytes there; the rest of range 1 is garbage.
            var staged = Data(repeating: 0xA5, count: data.count)
            staged.replaceSubrange(0..<((256 << 10) + kept), with: data.prefix((256 << 10) + kept))
            try staged.write(to: staging.appendingPathComponent(path))
            let sha = SHA256.hex(of: data)
            let sidecar = Sidecar(path: path, size: Int64(data.count), rangeSize: 256 << 10, commit: commit,
                                  etag: sha, sha256: sha, done: [0], hashedBytes: 0, hashState: nil,
                                  partial: [PartialRange(index: 1, bytes: Int64(kept))], partialBoot: boot)
            try JSONEncoder().encode(sidecar).write(to: staging.appendingPathComponent(path + ".sidecar.json"))
            hub.resetCounters()
            try download(repo)
            try assertSameBytes(repo, path)
            let served = hub.bodyBytes(for: "\(repo)/\(path)")
            let bodies = hub.servedRanges(for: "\(repo)/\(path)")
            if trusted {
                XCTAssertEqual(served, data.count - (256 << 10) - kept, "boot \(boot ?? "none"): the recorded bytes were kept")
                XCTAssertTrue(bodies.contains { $0.lowerBound == (256 << 10) + kept }, "range 1 resumed at its recorded byte: \(bodies)")
            } else {
                XCTAssertEqual(served, data.count - (256 << 10), "another boot's unsynced partial bytes were fetched again")
            }
        }
    }
}
