// What `speech cache prune` says and does must be true: a huggingface_hub repo that huggingface_hub is downloading into (a held
// `.locks/` lock, a fresh `blobs/*.incomplete`) is in flight and never evicted; orphan blobs
// (no revision points to them) are removed and reported, not counted against the cap forever;
// `--grace 0` says why a model used within the hour stays; and the output says where evicted
// bytes are and when they go.
import CacheAdmin
import Digest
import Foundation
import ModelCache
import SharedFiles
@testable import TestSupport
import XCTest

extension CacheAdminTests {
    // MARK: huggingface_hub in flight (D3)

    func testPruneNeverEvictsAHubRepoThatHuggingFaceHubIsDownloadingInto() throws {
        let hub = hfHome.appendingPathComponent("hub")
        let old = String(repeating: "a", count: 40)
        let writing = try makeHFRepo("acme/Writing", commit: old, ["w.bin": Self.bytes(60_000, seed: 4)], lfs: ["w.bin"])
        let locked = try makeHFRepo("acme/Locked", commit: old, ["l.bin": Self.bytes(60_000, seed: 5)], lfs: ["l.bin"])
        let idle = try makeHFRepo("acme/Idle", commit: old, ["i.bin": Self.bytes(60_000, seed: 6)], lfs: ["i.bin"])
        for folder in [writing, locked, idle] { age(folder.path + "/snapshots/" + old, hours: 5) }
        // huggingface_hub writes a blob as `blobs/<etag>.incomplete` under `.locks/<repo>/<etag>.lock`.
        try Data(count: 8192).write(to: writing.appendingPathComponent("blobs/" + String(repeating: "d", count: 64) + ".incomplete"))
        let lockPath = hub.path + "/.locks/models--acme--Locked/" + String(repeating: "e", count: 64) + ".lock"
        try FileManager.default.createDirectory(atPath: (lockPath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        // A released lock file stays behind (filelock never deletes it): only a held one counts.
        let released = hub.path + "/.locks/models--acme--Idle/" + String(repeating: "f", count: 64) + ".lock"
        try FileManager.default.createDirectory(atPath: (released as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data().write(to: URL(fileURLWithPath: released))
        // One process holds the flock (on its own open file) until it is killed: no child outlives it.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/bin/sh")
        holder.arguments = ["-c", "exec 9>>\"$0\"; flock -x 9; exec sleep 30", lockPath]
        try holder.run()
        defer { kill(holder.processIdentifier, SIGKILL); holder.waitUntilExit() }
        XCTAssertTrue(waitFor { HubBlobLock.acquire(lockPath, timeout: 0) == nil }, "the other process holds the flock")

        let report = admin.prune(PruneOptions(maxSize: 1024, hubCache: hub))
        XCTAssertEqual(report.evicted.map(\.repo), ["acme/Idle"])
        let reasons = Dictionary(uniqueKeysWithValues: report.kept.map { ($0.repo, $0.reason) })
        XCTAssertTrue(reasons["acme/Writing"]?.contains("in flight") == true && reasons["acme/Writing"]?.contains(".incomplete") == true, "\(reasons)")
        XCTAssertTrue(reasons["acme/Locked"]?.contains("in flight") == true && reasons["acme/Locked"]?.contains(lockPath) == true, "\(reasons)")
        for folder in [writing, locked] {
            XCTAssertTrue(exists(folder.path + "/snapshots/" + old), folder.path)
            XCTAssertTrue(exists(folder.path + "/refs/main"), folder.path)
        }
        // An abandoned `.incomplete` (older than the lease) does not hold the repo forever.
        age(writing.path + "/blobs/" + String(repeating: "d", count: 64) + ".incomplete", hours: 3)
        XCTAssertTrue(admin.prune(PruneOptions(maxSize: 1024, hubCache: hub)).evicted.map(\.repo).contains("acme/Writing"))
    }

    func waitFor(_ condition: () -> Bool) -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            usleep(10_000)
        }
        return false
    }

    // MARK: orphan blobs (D12)

    func testPruneRemovesOldOrphanBlobsAndReportsThem() throws {
        let hub = hfHome.appendingPathComponent("hub")
        let commit = String(repeating: "a", count: 40)
        let folder = try makeHFRepo("acme/Orphans", commit: commit, ["kept.bin": Self.bytes(20_000, seed: 7)], lfs: ["kept.bin"])
        let orphan = folder.path + "/blobs/" + SHA256.hex(of: Self.bytes(300_000, seed: 8))
        let fresh = folder.path + "/blobs/" + SHA256.hex(of: Self.bytes(300_000, seed: 9))
        try Self.bytes(300_000, seed: 8).write(to: URL(fileURLWithPath: orphan))
        try Self.bytes(300_000, seed: 9).write(to: URL(fileURLWithPath: fresh))
        age(orphan, hours: 5)

        let (output, code) = cache("prune", "--max-size", "100K", "--hf-cache", hub.path)
        XCTAssertEqual(code, 0, output)
        XCTAssertFalse(exists(orphan), "an orphan blob older than the grace period goes")
        XCTAssertTrue(exists(fresh), "a fresh one may be a blob huggingface_hub is about to point to")
        XCTAssertTrue(output.contains("orphan") && output.contains(SHA256.hex(of: Self.bytes(300_000, seed: 8)).prefix(12)), output)
        XCTAssertTrue(exists(folder.path + "/snapshots/\(commit)/kept.bin"))
        // What keeps the cache over its cap is named: never "the models kept above" with none listed.
        XCTAssertFalse(output.contains("the models kept above are protected") && !output.contains("kept "), output)
        XCTAssertTrue(output.contains(String(SHA256.hex(of: Self.bytes(300_000, seed: 9)).prefix(12))), "the fresh orphan is named as kept: \(output)")
    }

    // MARK: grace and where the bytes go (item 3, issue 34 item 6)

    func testGraceZeroSaysUsesAreRecordedHourlyAndTheOutputSaysWhereEvictedBytesAre() throws {
        try makeUsedModel("acme/Recent", usedHoursAgo: 0.1)
        try makeUsedModel("acme/Old", usedHoursAgo: 5, seed: 2)
        let (output, code) = cache("prune", "--max-size", "20K", "--grace", "0")
        XCTAssertEqual(code, 0, output)
        XCTAssertTrue(output.contains("evicted acme/Old"), output)
        XCTAssertTrue(output.contains("kept acme/Recent"), output)
        XCTAssertFalse(output.contains("within the grace period"), "not true at grace 0: \(output)")
        XCTAssertTrue(output.contains("uses are recorded hourly"), output)
        // On a local disk the evicted bytes are freed at once (no other node can be reading them).
        XCTAssertTrue(evictedEntries().isEmpty, "\(evictedEntries())")
        XCTAssertFalse(output.contains("wait in models/.evicted"), output)
        XCTAssertTrue(output.contains("freed"), output)
        let help = speechCache(["prune", "--help"]).output
        XCTAssertTrue(help.contains("recorded") && help.contains("hour"), help)
    }
}
