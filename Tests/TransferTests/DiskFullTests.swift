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
    let path = "model.safetensors"
    let size = 6 << 20  // 24 ranges of 256 KiB
    let rangeSize = 256 << 10
    var file: String { "\(repo)/\(path)" }

    func testDiskFullKeepsTheResumePointAndSaysWhatIsNeeded() throws {
        try assertDiskFullResumesExactly(tmpfsSize: "3m", someRangesDone: true)
    }

    func testDiskFullBeforeAnyRangeIsDoneStillKeepsEveryByte() throws {
        // 512 KiB of room and 4 ranges of 256 KiB in flight at once: the disk fills before any
        // range completes. The sidecar (written at the start) and the ranges' heads survive.
        try assertDiskFullResumesExactly(tmpfsSize: "512k", someRangesDone: false)
    }

    private func assertDiskFullResumesExactly(tmpfsSize: String, someRangesDone: Bool) throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=\(tmpfsSize)") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }

        XCTAssertThrowsError(try download(repo)) { error in
            guard case CacheError.diskFull(let directory, let needed, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(directory, self.modelDir(self.repo).path)
            XCTAssertGreaterThan(needed, 0)
            XCTAssertLessThanOrEqual(needed, Int64(self.size))
            XCTAssertTrue("\(error)".contains("more are needed"), "\(error)")
        }
        let staging = ModelDirectory(modelDir(repo)).stagingDirectory
        let kept = try XCTUnwrap(sidecar(repo, path), "the sidecar survives the full disk: \(entries(staging.path))")
        if someRangesDone { XCTAssertFalse(kept.done.isEmpty, "ranges that were durable before the disk filled are listed") }
        let heads = (kept.partial ?? []).reduce(0) { $0 + Int($1.bytes) }
        XCTAssertGreaterThan(heads, 0, "the heads of the ranges in flight are recorded: \(kept)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: staging.appendingPathComponent(ModelLayout.stagingName(path)).path),
                      "the staging file is kept")
        XCTAssertFalse(entries(staging.path).contains { $0.hasSuffix(".lock") }, "no lock is left behind")

        // Room again: the resume asks only for the ranges the sidecar does not list.
        XCTAssertEqual(TmpfsMount.run("/bin/mount", ["-o", "remount,size=16m", cacheBase.path]), 0)
        hub.resetCounters()
        try download(repo)
        try assertSameBytes(repo, path)
        let missing = size - kept.done.count * rangeSize - heads
        XCTAssertEqual(hub.bodyBytes(for: file), missing, "exactly what the sidecar does not list was fetched")
        XCTAssertEqual(overlap(hub.servedRanges(for: file)), 0)
    }

    /// Issue 22, defect 7: under the daemon a full disk failed nothing: the worker gave the range
    /// back and paused, forever. Now the request fails saying what is needed and what is free,
    /// the staged bytes stay, and the same command resumes once there is room.
    func testDiskFullUnderTheDaemonFailsTheRequestAndTheSameCommandResumes() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=3m") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }
        let daemon = try startDaemon(workers: 2, slots: 2)
        let first = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "full")
        XCTAssertTrue(waitForExit(first.process, timeout: 60), "the call ends: \(contents(first.stderr))\n\(contents(daemon.log))")
        XCTAssertEqual(first.process.terminationStatus, 1, contents(first.stderr))
        let said = contents(first.stderr)
        XCTAssertTrue(said.contains("is full") && said.contains("more are needed") && said.contains("are free"), said)
        XCTAssertTrue(FileManager.default.fileExists(atPath: ModelDirectory(modelDir(repo)).stagingDirectory
            .appendingPathComponent(ModelLayout.stagingName(path)).path), "the staging file is kept")
        XCTAssertLessThan(contents(daemon.log).components(separatedBy: "is full").count, 40, "no endless retry lines")

        XCTAssertEqual(TmpfsMount.run("/bin/mount", ["-o", "remount,size=32m", cacheBase.path]), 0)
        let again = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "again")
        XCTAssertTrue(waitForExit(again.process, timeout: 60))
        XCTAssertEqual(again.process.terminationStatus, 0, contents(again.stderr))
        try assertSameBytes(repo, path)
    }

    private func entries(_ directory: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    }
}
