// `speech cache prune`, `pin` and `unpin` against real files: least recently used first, pins,
// the grace period, models in flight (a live staging lock, another node's active request), a dry
// run that writes nothing, the rename into models/.evicted/ and (as on a shared filesystem,
// `holdEvicted`) the deletion after the grace period, and loads racing an eviction.
import CacheAdmin
import Digest
import Foundation
import ModelCache
import SharedFiles
import Spool
@testable import TestSupport
import XCTest

extension CacheAdminTests {
    /// A model of `bytes` bytes whose last use (marker, manifest and folder) was `hours` ago.
    @discardableResult
    func makeUsedModel(_ repo: String, bytes: Int = 100_000, usedHoursAgo hours: Double, seed: UInt8 = 1) throws -> ModelDirectory {
        let directory = try makeModel(repo, ["model.safetensors": Self.bytes(bytes, seed: seed)], lfs: ["model.safetensors"])
        directory.noteUse()
        for path in [directory.useMarkerPath, directory.path + "/" + ModelLayout.manifest, directory.path] { age(path, hours: hours) }
        return directory
    }

    func evictedEntries() -> [String] { FileTree.names(admin.evictedDirectory).sorted() }

    func testPruneEvictsTheLeastRecentlyUsedModelsUntilTheCacheFits() throws {
        let oldest = try makeUsedModel("acme/Oldest", usedHoursAgo: 9)
        let older = try makeUsedModel("acme/Older", usedHoursAgo: 6)
        let recent = try makeUsedModel("acme/Recent", usedHoursAgo: 3)
        let each = try admin.model("acme/Oldest").sizeOnDisk

        let report = admin.prune(PruneOptions(maxSize: each * 3 / 2, holdEvicted: true))
        XCTAssertEqual(report.evicted.map(\.repo), ["acme/Oldest", "acme/Older"], "least recently used first, until it fits")
        XCTAssertEqual(report.sizeBefore, each * 3)
        XCTAssertEqual(report.sizeAfter, each)
        XCTAssertFalse(exists(oldest.path))
        XCTAssertFalse(exists(older.path))
        XCTAssertTrue(exists(recent.finalURL("model.safetensors").path))
        // Renamed away whole, not deleted: each waits in models/.evicted/ for the grace period.
        let entries = evictedEntries()
        XCTAssertEqual(entries.count, 2, "\(entries)")
        for entry in entries {
            XCTAssertTrue(exists("\(admin.evictedDirectory)/\(entry)/model.safetensors"), entry)
        }
        XCTAssertEqual(admin.list().map(\.repo), ["acme/Recent"], "ls does not list evicted models")

        // Under the cap: a second pass evicts nothing, and the grace period keeps the folders.
        let again = admin.prune(PruneOptions(maxSize: each * 3 / 2, holdEvicted: true))
        XCTAssertTrue(again.evicted.isEmpty)
        XCTAssertTrue(again.purged.isEmpty)
        XCTAssertEqual(evictedEntries(), entries)
    }

    func testEvictedFoldersAreDeletedOnlyAfterTheGracePeriod() throws {
        try makeUsedModel("acme/Gone", usedHoursAgo: 5)
        XCTAssertEqual(admin.prune(PruneOptions(maxSize: 1024, grace: 3600, holdEvicted: true)).evicted.count, 1)
        XCTAssertEqual(evictedEntries().count, 1)
        XCTAssertTrue(admin.prune(PruneOptions(maxSize: 1024, grace: 3600, holdEvicted: true)).purged.isEmpty, "an hour has not passed")
        XCTAssertEqual(evictedEntries().count, 1)

        // Evicted two seconds ago with a grace period of one second: deleted by the next pass.
        let entry = evictedEntries()[0]
        let stamp = Int(entry.split(separator: "-")[0])!
        let earlier = "\(stamp - 2)" + entry.dropFirst(String(stamp).count)
        XCTAssertEqual(rename("\(admin.evictedDirectory)/\(entry)", "\(admin.evictedDirectory)/\(earlier)"), 0)
        let report = admin.prune(PruneOptions(maxSize: 1024, grace: 1))
        XCTAssertEqual(report.purged.count, 1)
        XCTAssertGreaterThanOrEqual(report.purged.first?.bytes ?? 0, 100_000)
        XCTAssertFalse(exists(admin.evictedDirectory), "the empty folder goes too")
    }

    func testPruneNeverEvictsPinnedInFlightOrRecentlyUsedModels() throws {
        try makeUsedModel("acme/Pinned", usedHoursAgo: 50)
        let locked = try makeUsedModel("acme/Locked", usedHoursAgo: 40)
        let requested = try makeUsedModel("acme/Requested", usedHoursAgo: 30)
        // Recorded 1.5 h ago with a grace period of 1 h: the last load may be up to an hour newer
        // than its record, so it counts as used within the grace period.
        let graced = try makeUsedModel("acme/Graced", usedHoursAgo: 1.5)
        let victim = try makeUsedModel("acme/Victim", usedHoursAgo: 20)
        XCTAssertTrue(try admin.pin(repo: "acme/Pinned"))
        XCTAssertFalse(try admin.pin(repo: "acme/Pinned"), "pinned already")
        let lock = try XCTUnwrap(StagingLock.acquire("model.safetensors", in: locked, owner: LockOwner(node: node), lease: 30))
        defer { lock.release() }
        age(locked.path, hours: 40)  // `.incomplete/` was made in it
        // Another node's request, still active.
        let spool = try Spool(base: cacheBase, node: "othernode")
        try spool.submit(SpoolRequest(repo: "acme/Requested", revision: "main", commit: String(repeating: "c", count: 40),
                                      modelDir: requested.path, files: [Self.record("model.safetensors", Data(), lfs: true)], node: "othernode"))

        let report = admin.prune(PruneOptions(maxSize: 1024))
        XCTAssertEqual(report.evicted.map(\.repo), ["acme/Victim"])
        XCTAssertFalse(exists(victim.path))
        let reasons = Dictionary(uniqueKeysWithValues: report.kept.map { ($0.repo, $0.reason) })
        XCTAssertEqual(reasons["acme/Pinned"], "pinned")
        XCTAssertTrue(reasons["acme/Locked"]?.contains("staging lock held by \(node)@\(getpid())") == true, "\(reasons)")
        XCTAssertTrue(reasons["acme/Requested"]?.contains("spool request") == true, "\(reasons)")
        XCTAssertTrue(reasons["acme/Graced"]?.contains("within the grace period") == true, "\(reasons)")
        XCTAssertTrue(report.overCap)
        for kept in ["acme/Pinned", "acme/Locked", "acme/Requested", "acme/Graced"] {
            XCTAssertTrue(exists(modelDir(kept).appendingPathComponent("model.safetensors").path), kept)
        }
        XCTAssertTrue(exists(graced.path))

        // Unpinned, it goes; the pin's folder is removed with its last pin.
        XCTAssertTrue(try admin.unpin(repo: "acme/Pinned"))
        XCTAssertFalse(try admin.unpin(repo: "acme/Pinned"))
        XCTAssertEqual(admin.pinnedRepos(), [])
        XCTAssertEqual(admin.prune(PruneOptions(maxSize: 1024)).evicted.map(\.repo), ["acme/Pinned"])
    }

    func testDryRunWritesNothing() throws {
        try makeUsedModel("acme/Old", usedHoursAgo: 9)
        try makeUsedModel("acme/Older", usedHoursAgo: 12)
        func snapshot() -> [String] { treeListing(cacheBase.path) }
        let before = snapshot()
        let (output, code) = cache("prune", "--max-size", "1K", "--dry-run")
        XCTAssertEqual(code, 0, output)
        XCTAssertTrue(output.contains("would evict acme/Older"), output)
        XCTAssertTrue(output.contains("would evict acme/Old,"), output)
        XCTAssertLessThan(output.range(of: "acme/Older")!.lowerBound, output.range(of: "acme/Old,")!.lowerBound, output)
        XCTAssertEqual(snapshot(), before, "a dry run creates, renames, re-times and deletes nothing")
    }

    func testCommandLinePinsAndPrunes() throws {
        try makeUsedModel("acme/Keep", usedHoursAgo: 9)
        try makeUsedModel("acme/Drop", usedHoursAgo: 8)
        XCTAssertEqual(cache("pin", "acme/Keep").exitCode, 0)
        XCTAssertTrue(exists(cacheBase.appendingPathComponent("pins/acme/Keep").path))
        let (output, code) = cache("prune", "--max-size", "150K", "--grace", "0.5")
        XCTAssertEqual(code, 0, output)
        XCTAssertTrue(output.contains("evicted acme/Drop"), output)
        XCTAssertTrue(output.contains("kept acme/Keep") && output.contains("pinned"), output)
        XCTAssertFalse(output.contains("still over the cap"), output)
        XCTAssertEqual(cache("unpin", "acme/Keep").exitCode, 0)
        XCTAssertEqual(cache("prune").exitCode, 64, "--max-size is required")
        let bad = cache("prune", "--max-size", "20 gigs")
        XCTAssertEqual(bad.exitCode, 64)
        XCTAssertTrue(bad.output.contains("--max-size needs a size"), bad.output)
        XCTAssertEqual(cache("prune", "--max-size", "1G", "--grace", "soon").exitCode, 64)
        XCTAssertEqual(cache("pin", "not a repo").exitCode, 1)
    }

    /// Loads race prune passes on another thread: each load finds the model whole or not at all,
    /// never part of it, and a load recorded in the instant of the eviction keeps the model.
    func testLoadsRacingAnEvictionSeeTheWholeModelOrNone() throws {
        var files: [String: Data] = [:]
        for i in 0..<20 { files["part-\(i).bin"] = Self.bytes(4096, seed: UInt8(i)) }
        let directory = try makeModel("acme/Raced", files)
        directory.noteUse()
        for path in [directory.useMarkerPath, directory.path + "/" + ModelLayout.manifest, directory.path] { age(path, hours: 5) }
        let admin = self.admin
        let done = expectation(description: "prune")
        Thread.detachNewThread {
            _ = admin.prune(PruneOptions(maxSize: 1024, holdEvicted: true))
            done.fulfill()
        }
        var outcomes = Set<Int>()
        for _ in 0..<200 { outcomes.insert(directory.loadCheck(.all, repo: "acme/Raced").missing.entries.count) }
        wait(for: [done], timeout: 30)
        XCTAssertTrue(outcomes.isSubset(of: [0, 20]), "a load saw part of the model: \(outcomes)")
        let evicted = !exists(directory.path)
        XCTAssertEqual(evicted, evictedEntries().count == 1, "evicted into models/.evicted/, or kept whole in place")
        if !evicted {
            XCTAssertEqual(directory.offlineCheck(.all, repo: "acme/Raced").missing, [])
            for path in [directory.useMarkerPath, directory.path + "/" + ModelLayout.manifest, directory.path] { age(path, hours: 5) }
            XCTAssertEqual(admin.prune(PruneOptions(maxSize: 1024, holdEvicted: true)).evicted.count, 1)
        }
        // A load after the eviction gets a clear error naming what is missing.
        XCTAssertFalse(exists(directory.path))
        XCTAssertThrowsError(try downloader().downloadBlocking(repo: "acme/Raced", cacheBaseDir: cacheBase, offlineMode: true)) { error in
            XCTAssertTrue("\(error)".contains("offline mode: acme/Raced is not complete"), "\(error)")
        }
    }
}

/// Every path under `root` with its type, size and mtime, sorted: what a dry run must not change.
func treeListing(_ root: String) -> [String] {
    var out: [String] = []
    func walk(_ dir: String) {
        for name in FileTree.names(dir).sorted() {
            let path = dir + "/" + name
            guard let f = FileTree.facts(path) else { continue }
            out.append("\(path) \(f.isDirectory) \(f.allocated) \(f.mtime)")
            if f.isDirectory { walk(path) }
        }
    }
    walk(root)
    return out
}

extension CacheAdminTests {
    /// In a huggingface_hub cache a revision is evicted with the blobs only it points to; the
    /// repo's other revision, its blobs (one shared) and `refs/main` stay and still resolve.
    func testPruneEvictsAnOldHuggingFaceHubRevisionAndKeepsTheSharedBlobs() throws {
        let hub = hfHome.appendingPathComponent("hub")
        let old = String(repeating: "a", count: 40)
        let new = String(repeating: "b", count: 40)
        let shared = Self.bytes(30_000, seed: 1)
        _ = try makeHFRepo("acme/Hub", commit: old, ["shared.bin": shared, "old.bin": Self.bytes(60_000, seed: 2)], lfs: ["shared.bin", "old.bin"])
        let folder = try makeHFRepo("acme/Hub", commit: new, ["shared.bin": shared, "new.bin": Self.bytes(60_000, seed: 3)],
                                    lfs: ["shared.bin", "new.bin"])
        age(folder.path + "/snapshots/" + old, hours: 5)
        let oldBlob = folder.path + "/blobs/" + SHA256.hex(of: Self.bytes(60_000, seed: 2))

        let report = admin.prune(PruneOptions(maxSize: 100 << 10, hubCache: hub, holdEvicted: true))
        XCTAssertEqual(report.evicted.map { PruneReport.name($0.repo, $0.revision) }, ["acme/Hub@aaaaaaaaaaaa (huggingface_hub)"],
                       "the newer revision fits under the cap")
        XCTAssertFalse(exists(folder.path + "/snapshots/" + old))
        XCTAssertFalse(exists(oldBlob), "the blob only the old revision pointed to went with it")
        for path in ["shared.bin", "new.bin"] {
            XCTAssertNotNil(FileManager.default.contents(atPath: folder.path + "/snapshots/\(new)/\(path)"), path)
        }
        XCTAssertEqual(try String(contentsOfFile: folder.path + "/refs/main", encoding: .utf8), new)
        let trash = folder.path + "/.speech-fetch-evicted"
        let entries = FileTree.names(trash)
        XCTAssertEqual(entries.count, 1, "\(entries)")
        XCTAssertNotNil(FileTree.facts("\(trash)/\(entries.first ?? "")/snapshot/old.bin"), "renamed away, not deleted")
        XCTAssertNotNil(FileTree.facts("\(trash)/\(entries.first ?? "")/\(SHA256.hex(of: Self.bytes(60_000, seed: 2)))"), "its blob too")

        // After the grace period the next pass deletes it.
        _ = admin.prune(PruneOptions(maxSize: 1 << 30, grace: 0, hubCache: hub))
        XCTAssertFalse(exists(trash))
    }
}
