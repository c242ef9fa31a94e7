// Downloads while opens and stats of the spool and staging paths fail with ESTALE and EIO, as
// a network filesystem client's do after another client renamed or unlinked a file.
// The faults come from scripts/faultfs/faultfs.c, an LD_PRELOAD shim this test builds with gcc.
import Digest
import Foundation
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class StaleHandleTests: DaemonTestCase {
    let repo = "org/Stale"
    let files = ["model.safetensors": 6 << 20, "model-2.safetensors": 3 << 20, "config.json": 3000]

    /// gcc output of scripts/faultfs/faultfs.c in the test's temp folder.
    private func buildShim() throws -> URL {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/faultfs/faultfs.c")
        guard let gcc = ["/usr/bin/gcc", "/usr/bin/cc", "/usr/local/bin/gcc"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) else { throw XCTSkip("no C compiler to build the fault shim (apt-get install gcc)") }
        let output = temp.appendingPathComponent("faultfs.so")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: gcc)
        p.arguments = ["-shared", "-fPIC", "-O2", "-w", "-o", output.path, source.path, "-ldl"]
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, "gcc builds \(source.path)")
        return output
    }

    /// The environment that makes `estale` % of the matching calls fail with ESTALE and `eio` % with EIO.
    private func faulty(_ shim: URL, seed: Int, log: URL, estale: Int = 5, eio: Int = 2) -> [String: String] {
        environment(extra: [
            "LD_PRELOAD": shim.path,
            "FAULTFS_PATHS": "/spool/:/.incomplete",
            "FAULTFS_ESTALE": "\(estale)",
            "FAULTFS_EIO": "\(eio)",
            "FAULTFS_SEED": "\(seed)",
            "FAULTFS_LOG": log.path,
            "SPEECH_FETCH_LEASE_SECONDS": "4",
            "HF_DOWNLOAD_RANGE_CHUNK": "\(128 << 10)",
        ])
    }

    private func runSpeech(_ arguments: [String], environment env: [String: String], hint: String) throws -> (status: Int32, stderr: String) {
        let (p, _, err) = try launch(speechBinary, arguments, environment: env, hint: hint)
        XCTAssertTrue(waitForExit(p, timeout: 120), "\(hint) finishes")
        return (p.terminationStatus, contents(err))
    }

    /// Every file verifies, the Hub served each byte once, faults were injected, and no staging
    /// lock was broken (no process died, so every holder was alive).
    private func assertSurvived(_ log: URL, minimumFaults: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        for (path, size) in files {
            try assertSameBytes(repo, path, file: file, line: line)
            XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), size, "\(path): each byte served once", file: file, line: line)
        }
        let lines = contents(log).split(separator: "\n")
        let injected = lines.filter { $0.hasPrefix("inject ") }
        let breaks = lines.filter { $0.hasPrefix("break ") }
        print("stale handles: \(injected.count) faults injected (\(injected.filter { $0.contains(" \(ESTALE) ") }.count) ESTALE), \(breaks.count) locks broken")
        XCTAssertGreaterThanOrEqual(injected.count, minimumFaults, "the shim injected faults", file: file, line: line)
        XCTAssertEqual(breaks, [], "no live staging lock was broken", file: file, line: line)
    }

    func testEmbeddedDownloadSurvivesStaleHandles() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: files)
        let shim = try buildShim()
        let log = temp.appendingPathComponent("faults.log")
        // An embedded run opens and stats few shared paths (it holds its files open): a higher
        // rate, and several runs, each with a fresh cache, so the faults fall on different calls.
        for seed in 1...4 {
            try? FileManager.default.removeItem(at: cacheBase)
            hub.resetCounters()
            let run = try runSpeech(["download", repo, "--cache-base", cacheBase.path],
                                    environment: faulty(shim, seed: seed, log: log, estale: 10, eio: 5), hint: "embedded-\(seed)")
            XCTAssertEqual(run.status, 0, "seed \(seed): embedded download succeeds: \(run.stderr)")
            try assertSurvived(log, minimumFaults: seed)
        }
    }

    /// The completeness check of a huggingface_hub cache looks again on a stale handle, as the
    /// native one does: a complete model is found complete offline while its pointers' and blobs'
    /// lstats fail now and then with ESTALE.
    func testAHuggingFaceCacheIsFoundCompleteOfflineThroughStaleHandles() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: files)
        let hubCache = temp.appendingPathComponent("hf-hub")
        let fetched = try runSpeech(["download", repo, "--hf-cache", hubCache.path], environment: environment(), hint: "fetch")
        XCTAssertEqual(fetched.status, 0, fetched.stderr)
        let shim = try buildShim()
        let log = temp.appendingPathComponent("faults.log")
        for seed in 1...6 {
            var env = faulty(shim, seed: seed, log: log, estale: 25, eio: 0)
            env["FAULTFS_PATHS"] = "/snapshots/:/blobs"
            let offline = try runSpeech(["download", repo, "--hf-cache", hubCache.path, "--offline"], environment: env, hint: "offline-\(seed)")
            XCTAssertEqual(offline.status, 0, "seed \(seed): a stale handle is not a missing file: \(offline.stderr)")
        }
        XCTAssertGreaterThan(contents(log).split(separator: "\n").filter { $0.hasPrefix("inject ") }.count, 6, "the shim injected faults")
    }

    func testDaemonHostedDownloadAndWaiterSurviveStaleHandles() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: files)
        let shim = try buildShim()
        let log = temp.appendingPathComponent("faults.log")
        let env = faulty(shim, seed: 7, log: log)
        try startDaemon(workers: 2, slots: 2, environment: env)
        let download = try launch(speechBinary, ["download", repo, "--cache-base", cacheBase.path], environment: env, hint: "hosted")
        XCTAssertTrue(waitUntil(timeout: 30) { !self.names("requests").isEmpty }, "the request reaches the spool")
        let waiter = try launch(speechBinary, ["wait", repo, "--cache-base", cacheBase.path], environment: env, hint: "wait")
        XCTAssertTrue(waitForExit(download.process, timeout: 120), "the download finishes")
        XCTAssertEqual(download.process.terminationStatus, 0, "daemon-hosted download succeeds: \(contents(download.stderr))")
        XCTAssertTrue(waitForExit(waiter.process, timeout: 30), "the waiter ends")
        XCTAssertEqual(waiter.process.terminationStatus, 0, "the waiter sees the request done: \(contents(waiter.stderr))")
        XCTAssertEqual(names("failed"), [], "no request failed")
        try assertSurvived(log, minimumFaults: 20)
    }

    /// A part whose size a splicer reads short once (as a client that looked at the part under its
    /// temp name while its writer wrote it may report for about a second) is looked at again and
    /// spliced, never dropped as "the wrong size" and fetched again. The ranges come as parts of
    /// bytes (`SPEECH_FETCH_RANGES_IN_PLACE=0`): a range written in place publishes a record, read
    /// by its first line, and a file of one range is finished by its fetcher with no part at all.
    func testAPartWhoseSizeIsReadShortOnceIsSplicedNotFetchedAgain() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: files)
        let shim = try buildShim()
        let log = temp.appendingPathComponent("faults.log")
        let env = environment(extra: [
            "LD_PRELOAD": shim.path,
            "FAULTFS_SHORT_ONCE": "/spool/parts/",
            "FAULTFS_LOG": log.path,
            "HF_DOWNLOAD_RANGE_CHUNK": "\(256 << 10)",
            "SPEECH_FETCH_RANGES_IN_PLACE": "0",
        ])
        try startDaemon(workers: 2, slots: 2, environment: env)
        let run = try runSpeech(["download", repo, "--cache-base", cacheBase.path], environment: env, hint: "hosted")
        XCTAssertEqual(run.status, 0, "daemon-hosted download succeeds: \(run.stderr)")
        for (path, size) in files {
            try assertSameBytes(repo, path)
            XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), size, "\(path): each byte served once")
        }
        let shortened = contents(log).split(separator: "\n").filter { $0.hasPrefix("short ") }
        print("short sizes reported: \(shortened.count)")
        XCTAssertGreaterThan(shortened.count, 0, "the shim reported parts short")
    }
}
