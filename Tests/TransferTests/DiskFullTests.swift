// Disk full (ENOSPC) on a small tmpfs: the download fails saying how much more space it needs,
// keeps its staging file and sidecar, and the next call (with room) fetches exactly the ranges
// the sidecar does not list.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class DiskFullTests: DaemonTestCase {
    let repo = "org/Full"
    let rangeSize = 256 << 10

    // Each file fits the free space on its own (a file that does not is refused before anything
    // is written: `testAFileLargerThanTheFreeDiskIsRefusedBeforeAnythingIsWritten`), the set
    // does not: the disk fills in the middle of the transfer.

    func testDiskFullKeepsTheResumePointAndSaysWhatIsNeeded() throws {
        try assertDiskFullResumesExactly(tmpfsSize: "3m", files: ["a.safetensors": 2 << 20, "b.safetensors": 2 << 20],
                                         someRangesDone: true)
    }

    func testDiskFullBeforeAnyRangeIsDoneStillKeepsEveryByte() throws {
        // 512 KiB of room and four ranges in flight at once (800 KiB): the disk fills before most
        // ranges complete. The sidecars (written at the start) and the ranges' heads survive.
        try assertDiskFullResumesExactly(tmpfsSize: "512k", files: ["a.safetensors": 400 << 10, "b.safetensors": 400 << 10],
                                         someRangesDone: false, extra: ["HF_DOWNLOAD_RANGE_THRESHOLD": "\(256 << 10)"])
    }

    func testAFileLargerThanTheFreeDiskIsRefusedBeforeAnythingIsWritten() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 6 << 20])
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=3m") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }
        XCTAssertThrowsError(try download(repo)) { error in
            guard case CacheError.tooLargeForDisk(let path, let size, let available, let directory) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, "model.safetensors")
            XCTAssertEqual(size, 6 << 20)
            XCTAssertLessThan(available, 3 << 20)
            XCTAssertEqual(directory, self.modelDir(self.repo).path)
            XCTAssertTrue("\(error)".contains("nothing was written"), "\(error)")
        }
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/model.safetensors"), 0, "no byte of it was asked for")
        XCTAssertEqual(entries(ModelDirectory(modelDir(repo)).stagingDirectory.path), [], "nothing was staged")
    }

    private func assertDiskFullResumesExactly(tmpfsSize: String, files: [String: Int], someRangesDone: Bool,
                                              extra: [String: String] = [:]) throws {
        try TestHub.generateRepo(root: root, repo: repo, files: files)
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=\(tmpfsSize)") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }
        let total = files.values.reduce(0, +)

        XCTAssertThrowsError(try download(repo, extra: extra)) { error in
            guard case CacheError.diskFull(let directory, let needed, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(directory, self.modelDir(self.repo).path)
            XCTAssertGreaterThan(needed, 0)
            XCTAssertLessThanOrEqual(needed, Int64(total))
            XCTAssertTrue("\(error)".contains("more are needed"), "\(error)")
        }
        let staging = ModelDirectory(modelDir(repo)).stagingDirectory
        var kept = 0  // bytes the resume needs not fetch: final files, done ranges, recorded heads
        var anyDone = false
        var heads = 0
        for (path, size) in files {
            if finalExists(repo, path) {
                kept += size
                continue
            }
            let record = try XCTUnwrap(sidecar(repo, path), "the sidecar of \(path) survives the full disk: \(entries(staging.path))")
            anyDone = anyDone || !record.done.isEmpty
            kept += record.done.reduce(0) { $0 + min(size, ($1 + 1) * rangeSize) - $1 * rangeSize }
            heads += (record.partial ?? []).reduce(0) { $0 + Int($1.bytes) }
            XCTAssertTrue(FileManager.default.fileExists(atPath: staging.appendingPathComponent(ModelLayout.stagingName(path)).path),
                          "the staging file of \(path) is kept")
        }
        if someRangesDone { XCTAssertTrue(anyDone, "ranges that were durable before the disk filled are listed") }
        XCTAssertGreaterThan(heads, 0, "the heads of the ranges in flight are recorded")
        XCTAssertFalse(entries(staging.path).contains { $0.hasSuffix(".lock") }, "no lock is left behind")

        // Room again: the resume asks only for the ranges the sidecars do not list.
        XCTAssertEqual(TmpfsMount.run("/bin/mount", ["-o", "remount,size=16m", cacheBase.path]), 0)
        hub.resetCounters()
        try download(repo, extra: extra)
        var fetched = 0
        for (path, _) in files {
            try assertSameBytes(repo, path)
            fetched += hub.bodyBytes(for: "\(repo)/\(path)")
            XCTAssertEqual(overlap(hub.servedRanges(for: "\(repo)/\(path)")), 0)
        }
        XCTAssertEqual(fetched, total - kept - heads, "exactly what the sidecars do not list was fetched")
    }

    /// Under the daemon a full disk fails the request (the worker does not give the range back and
    /// pause forever), saying what is needed and what is free; the staged bytes stay, and the same
    /// command resumes once there is room.
    func testDiskFullUnderTheDaemonFailsTheRequestAndTheSameCommandResumes() throws {
        let files = ["a.safetensors": 2 << 20, "b.safetensors": 2 << 20]
        try TestHub.generateRepo(root: root, repo: repo, files: files)
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=3m") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }
        let daemon = try startDaemon(workers: 2, slots: 2)
        let first = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "full")
        XCTAssertTrue(waitForExit(first.process, timeout: 60), "the call ends: \(contents(first.stderr))\n\(contents(daemon.log))")
        XCTAssertEqual(first.process.terminationStatus, 1, contents(first.stderr))
        let said = contents(first.stderr)
        // The worker's words, or, when the disk had no block left even for them, the empty
        // record's (FailureOnFullDiskTests): either way the call ends, naming a full disk.
        XCTAssertTrue(said.contains("is full") && (said.contains("more are needed") && said.contains("are free")
                                                   || said.contains("no room was left")), said)
        let staged = entries(ModelDirectory(modelDir(repo)).stagingDirectory.path)
        XCTAssertTrue(staged.contains { $0.hasSuffix(".sidecar.json") }, "the staged bytes are kept: \(staged)")
        XCTAssertLessThan(contents(daemon.log).components(separatedBy: "is full").count, 40, "no endless retry lines")

        XCTAssertEqual(TmpfsMount.run("/bin/mount", ["-o", "remount,size=32m", cacheBase.path]), 0)
        let again = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "again")
        XCTAssertTrue(waitForExit(again.process, timeout: 60))
        XCTAssertEqual(again.process.terminationStatus, 0, contents(again.stderr))
        for path in files.keys { try assertSameBytes(repo, path) }
    }

    /// The same refusal when a daemon serves the cache: checked before the request is handed over.
    func testAFileLargerThanTheFreeDiskIsRefusedBeforeItIsHandedOver() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 6 << 20])
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=3m") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }
        _ = try startDaemon(workers: 1, slots: 1)
        let call = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "too-large")
        XCTAssertTrue(waitForExit(call.process, timeout: 30))
        XCTAssertEqual(call.process.terminationStatus, 1, contents(call.stderr))
        XCTAssertTrue(contents(call.stderr).contains("nothing was written"), contents(call.stderr))
        XCTAssertEqual(names("requests"), [], "nothing was handed over")
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/model.safetensors"), 0)
    }

    private func entries(_ directory: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    }
}
