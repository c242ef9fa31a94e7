// Downloads into a huggingface_hub cache (the layout itself; scripts/check-hf-cache has the
// public client read it): blobs by etag, relative pointers, refs, resume without a half blob,
// offline look-ups by ref, and the cache commands that honour HF_HUB_CACHE.
import CacheAdmin
import Digest
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class HubCacheTests: HubTestCase {
    let repo = "org/Model"
    var hubCache: URL { temp.appendingPathComponent("hf-hub") }
    var folder: URL { hubCache.appendingPathComponent("models--org--Model") }

    func makeRepo() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 3 << 20, "sub/extra.bin": 300_000])
        try TestHub.writeRepo(root: root, repo: repo, files: [
            "config.json": Data("{\"a\": 1}".utf8),
            "tokenizer/vocab.json": Data("{\"hello\": 0}".utf8),
            "empty.txt": Data(),
        ])
    }

    func hubDownload(offline: Bool? = nil, extra: [String: String] = [:], cancel: @escaping @Sendable () -> Bool = { false }) throws -> DownloadResult {
        try downloader(extra).downloadBlocking(repo: repo, cacheBaseDir: cacheBase, huggingFaceCache: hubCache,
                                               offlineMode: offline, isCancelled: cancel)
    }

    func link(_ path: String) throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: path)
    }

    func testDownloadWritesBlobsByEtagRelativePointersAndTheRef() throws {
        try makeRepo()
        let result = try hubDownload()
        let commit = try XCTUnwrap(result.commit)
        let snapshot = folder.appendingPathComponent("snapshots/\(commit)")
        XCTAssertEqual(result.directory.standardizedFileURL.path, snapshot.standardizedFileURL.path)
        XCTAssertEqual(try String(contentsOf: folder.appendingPathComponent("refs/main"), encoding: .utf8), commit,
                       "refs/main holds the commit, no newline")
        let sha = SHA256.hex(of: try source(repo, "model.safetensors"))
        XCTAssertEqual(try link(snapshot.appendingPathComponent("model.safetensors").path), "../../blobs/\(sha)")
        let vocab = try source(repo, "tokenizer/vocab.json")
        let blobID = SHA1.hex(of: Data("blob \(vocab.count)\u{0}".utf8) + vocab)
        XCTAssertEqual(try link(snapshot.appendingPathComponent("tokenizer/vocab.json").path), "../../../blobs/\(blobID)")
        for path in result.files {
            XCTAssertEqual(try Data(contentsOf: snapshot.appendingPathComponent(path)), try source(repo, path), path)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder.appendingPathComponent("trees/\(commit).json").path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: hubCache.appendingPathComponent(".locks/models--org--Model/\(sha).lock").path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.appendingPathComponent(".incomplete").path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).path), "nothing in the native layout")

        hub.resetCounters()
        let again = try hubDownload()
        XCTAssertEqual(again.fetched, [], "a complete snapshot is current")
        XCTAssertEqual(hub.requestLog().count, 2, "only the revision and the tree: \(hub.requestLog())")
    }

    func testInterruptedDownloadLeavesNoHalfBlobAndResumes() throws {
        try makeRepo()
        let file = "\(repo)/model.safetensors"
        // Slow enough (12 ranges, 4 at a time, ~3 s in all) that the cancel after 3 ranges lands
        // long before the file could finish, even on a loaded machine.
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: file)
        let sha = SHA256.hex(of: try source(repo, "model.safetensors"))
        let sidecar = folder.appendingPathComponent(".incomplete/model.safetensors.sidecar.json")
        let stop = StopFlag()
        let watcher = Thread {
            while !stop.isSet {
                if let data = FileManager.default.contents(atPath: sidecar.path),
                   let record = try? JSONDecoder().decode(Sidecar.self, from: data), record.done.count >= 3 { stop.set() }
                usleep(10_000)
            }
        }
        watcher.start()
        XCTAssertThrowsError(try hubDownload(cancel: { stop.isSet })) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        let blobs = (try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("blobs").path)) ?? []
        XCTAssertFalse(blobs.contains { $0.hasPrefix(sha) }, "no blob (half or whole) of the interrupted file: \(blobs)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder.appendingPathComponent(".incomplete/model.safetensors").path),
                      "staging lives in the repo folder's .incomplete/")
        let servedBefore = hub.bodyBytes(for: file)

        hub.clearFaults()
        let result = try hubDownload()
        XCTAssertTrue(result.fetched.contains("model.safetensors"))
        XCTAssertEqual(try Data(contentsOf: result.directory.appendingPathComponent("model.safetensors")),
                       try source(repo, "model.safetensors"))
        XCTAssertLessThan(hub.bodyBytes(for: file) - servedBefore, 3 << 20, "the resume kept the recorded ranges")
    }

    func testOfflineReadsTheSnapshotTheRefNamesAndAMissNamesTheFolder() throws {
        try makeRepo()
        XCTAssertThrowsError(try hubDownload(offline: true)) { error in
            XCTAssertTrue("\(error)".contains(self.folder.path), "\(error)")
        }
        let online = try hubDownload()
        hub.resetCounters()
        let offline = try hubDownload(offline: true)
        XCTAssertEqual(offline.directory.standardizedFileURL.path, online.directory.standardizedFileURL.path)
        XCTAssertEqual(hub.totalRequests, 0)
        // A missing blob makes its pointer dangle: the snapshot is incomplete, and the miss says where.
        let sha = SHA256.hex(of: try source(repo, "model.safetensors"))
        try FileManager.default.removeItem(at: folder.appendingPathComponent("blobs/\(sha)"))
        XCTAssertThrowsError(try hubDownload(offline: true)) { error in
            XCTAssertTrue("\(error)".contains("model.safetensors") && "\(error)".contains(online.directory.path), "\(error)")
        }
    }

    func testImportHFAndCacheLsHonourHFHubCache() throws {
        try makeRepo()
        _ = try hubDownload()
        var env = environment()
        env["HF_HUB_CACHE"] = hubCache.path
        let admin = CacheAdmin(cacheBase: cacheBase, environment: env)
        let listed = try XCTUnwrap(admin.listHubCache())
        XCTAssertEqual(listed.models.map(\.repo), [repo])
        XCTAssertEqual(listed.models.first?.state, .complete)
        XCTAssertEqual(listed.models.first?.fileCount, 5)
        let report = try admin.importHF()
        XCTAssertEqual(report.hubDirectory.standardizedFileURL.path, hubCache.standardizedFileURL.path)
        for path in ["model.safetensors", "config.json", "tokenizer/vocab.json"] { try assertSameBytes(repo, path) }
    }
}

/// A flag set once from any thread.
final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
