// A model folder that holds nothing of the model (an existing empty folder, or only the cache's
// own bookkeeping: the use marker, `.incomplete/` staging, a manifest's leftover temp) is a miss
// through every entry point: offline loads in all three layouts, the catalog's fromPretrained,
// weightsExist, the unreachable-Hub fallback and `speech wait`. A miss leaves the folder exactly
// as it was. And a native folder serves offline only the revision its manifest recorded.
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class BookkeepingOnlyFolderTests: HubTestCase {
    let repo = "org/Voice"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: ["config.json": 300, "model.safetensors": 200_000])
    }

    /// Every path under `dir` with its kind, size and mtime: what a miss must not change.
    func snapshot(_ dir: URL) -> [String] {
        func facts(_ path: String) -> String {
            var st = stat()
            guard lstat(path, &st) == 0 else { return "absent" }
            return "\(st.st_mode) \(st.st_size) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
        }
        var out = [facts(dir.path)]
        func walk(_ path: String, _ prefix: String) {
            for name in ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() {
                out.append("\(prefix)\(name) \(facts(path + "/" + name))")
                var st = stat()
                if lstat(path + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR { walk(path + "/" + name, prefix + name + "/") }
            }
        }
        walk(dir.path, "")
        return out
    }

    /// The folders a new user (or a killed run) leaves: empty, or holding bookkeeping only.
    func bookkeepingOnlyFolders() throws -> [(what: String, dir: URL)] {
        var folders: [(String, URL)] = []
        func folder(_ what: String, _ make: (URL) throws -> Void) throws {
            let dir = temp.appendingPathComponent("folders/\(folders.count)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try make(dir)
            folders.append((what, dir))
        }
        try folder("an existing empty folder") { _ in }
        try folder("only the use marker") { try Data().write(to: $0.appendingPathComponent(ModelLayout.useMarker)) }
        try folder("only .incomplete/ staging") { dir in
            let staging = dir.appendingPathComponent(ModelLayout.staging)
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            try Data(count: 4096).write(to: staging.appendingPathComponent(ModelLayout.stagingName("model.safetensors")))
            try Data("{}".utf8).write(to: staging.appendingPathComponent(ModelLayout.sidecarName("model.safetensors")))
        }
        try folder("only a leftover manifest temp") {
            try Data("{\"repo\":".utf8).write(to: $0.appendingPathComponent("." + ModelLayout.manifest + ".tmp.4242.7"))
        }
        return folders
    }

    func testOfflineIntoAnEmptyOrBookkeepingOnlyFolderIsAMissThatChangesNothing() throws {
        let d = downloader()
        for (what, dir) in try bookkeepingOnlyFolders() {
            let before = snapshot(dir)
            XCTAssertThrowsError(try d.downloadBlocking(repo: repo, cacheDir: dir, offlineMode: true), what) { error in
                guard case CacheError.cacheMiss(_, let directory, _, let reason) = error else { return XCTFail("\(what): \(error)") }
                XCTAssertEqual(directory, dir.path, what)
                XCTAssertEqual(reason, "offline mode", what)
            }
            XCTAssertEqual(snapshot(dir), before, "\(what): a miss leaves the folder exactly as it was")
            XCTAssertFalse(HuggingFaceDownloader.weightsExist(in: dir), what)
        }
        XCTAssertEqual(hub.totalRequests, 0)
    }

    func testOfflineUnderACacheBaseIntoAnEmptyModelFolderIsAMissThatChangesNothing() throws {
        let dir = modelDir(repo)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let before = snapshot(dir)
        XCTAssertThrowsError(try download(repo, offline: true)) { error in
            guard case CacheError.cacheMiss(_, let directory, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(directory, dir.path)
        }
        XCTAssertEqual(snapshot(dir), before)
        XCTAssertThrowsError(try downloader().wait(repo: repo, cacheBaseDir: cacheBase), "`speech wait` must not say ready") { error in
            guard case CacheError.cacheMiss = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(snapshot(dir), before)
    }

    func testOfflineIntoAnEmptyHuggingFaceHubSnapshotIsAMissThatChangesNothing() throws {
        let hubCache = temp.appendingPathComponent("hf-hub")
        let commit = String(repeating: "e", count: 40)
        let folder = hubCache.appendingPathComponent("models--org--Voice")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("snapshots/\(commit)"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("refs"), withIntermediateDirectories: true)
        try Data(commit.utf8).write(to: folder.appendingPathComponent("refs/main"))
        let before = snapshot(folder)
        XCTAssertThrowsError(try downloader().downloadBlocking(repo: repo, huggingFaceCache: hubCache, offlineMode: true)) { error in
            guard case CacheError.cacheMiss = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(snapshot(folder), before, "no use marker for a revision that is not there")
    }

    func testOfflineIntoAPartialFolderIsAMissThatChangesNothing() throws {
        try download(repo)
        let dir = modelDir(repo)
        try FileManager.default.removeItem(at: dir.appendingPathComponent("model.safetensors"))
        try? FileManager.default.removeItem(at: dir.appendingPathComponent(ModelLayout.useMarker))
        let before = snapshot(dir)
        XCTAssertThrowsError(try download(repo, offline: true)) { error in
            guard case CacheError.cacheMiss(_, _, let missing, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(missing, ["model.safetensors"])
        }
        XCTAssertEqual(snapshot(dir), before)
        XCTAssertFalse(HuggingFaceDownloader.weightsExist(in: dir))
        // A complete load records its use.
        try download(repo)
        try download(repo, offline: true)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.appendingPathComponent(ModelLayout.useMarker).path))
    }

    func testFromPretrainedOfflineIntoABookkeepingOnlyFolderIsAMiss() async throws {
        for (what, dir) in try bookkeepingOnlyFolders() {
            let before = snapshot(dir)
            do {
                _ = try await KokoroTTSModel.fromPretrained(cacheDir: dir, offlineMode: true, downloader: downloader())
                XCTFail("\(what): fromPretrained offline said done with nothing on disk")
            } catch CacheError.cacheMiss(_, let directory, _, _) {
                XCTAssertEqual(directory, dir.path, what)
            }
            XCTAssertEqual(snapshot(dir), before, what)
        }
    }

    /// An unreachable Hub never turns an empty folder into "the complete copy".
    func testUnreachableHubIntoABookkeepingOnlyFolderFails() throws {
        let dead = deadEndpoint()
        let d = downloader(["SPEECH_FETCH_RETRY_ATTEMPTS": "1"], endpoint: dead)
        for (what, dir) in try bookkeepingOnlyFolders() {
            XCTAssertThrowsError(try d.downloadBlocking(repo: repo, cacheDir: dir), what) { error in
                guard case DownloadError.hubUnreachable(_, let directory, let missing, _) = error else { return XCTFail("\(what): \(error)") }
                XCTAssertEqual(directory, dir.path, what)
                XCTAssertFalse(missing.isEmpty, what)
            }
        }
    }

    // MARK: Revisions (D8)

    func testOfflineServesOnlyTheRevisionTheManifestRecorded() throws {
        let online = try download(repo)
        let commit = try XCTUnwrap(online.commit)
        let d = downloader()
        XCTAssertNoThrow(try d.downloadBlocking(repo: repo, revision: "main", cacheBaseDir: cacheBase, offlineMode: true))
        XCTAssertNoThrow(try d.downloadBlocking(repo: repo, revision: commit, cacheBaseDir: cacheBase, offlineMode: true),
                         "the full commit id the manifest recorded")
        for other in ["v2", String(repeating: "0", count: 40)] {
            XCTAssertThrowsError(try d.downloadBlocking(repo: repo, revision: other, cacheBaseDir: cacheBase, offlineMode: true)) { error in
                guard case CacheError.cacheMiss(_, let directory, let missing, _) = error else { return XCTFail("\(error)") }
                XCTAssertEqual(directory, modelDir(repo).path)
                XCTAssertTrue(missing.paths.contains { $0.hasPrefix("revision \(other)") && $0.contains(commit.prefix(12)) }, "\(missing)")
                XCTAssertTrue("\(error)".contains(other) && "\(error)".contains(directory), "\(error)")
            }
        }
        // The unreachable-Hub fallback serves only that revision too.
        let dead = downloader(["SPEECH_FETCH_RETRY_ATTEMPTS": "1"], endpoint: deadEndpoint())
        XCTAssertThrowsError(try dead.downloadBlocking(repo: repo, revision: "v2", cacheBaseDir: cacheBase)) { error in
            guard case DownloadError.hubUnreachable = error else { return XCTFail("\(error)") }
        }
        XCTAssertNotNil(try dead.downloadBlocking(repo: repo, revision: "main", cacheBaseDir: cacheBase).warning)
    }
}
