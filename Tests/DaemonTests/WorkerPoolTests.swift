// The supervisor's worker pool at its limits: a worker count beyond the bound is a usage error,
// and a daemon that can start no worker exits saying why instead of taking requests its callers
// wait on forever.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class WorkerPoolTests: DaemonTestCase {
    let repo = "org/Pool"
    let path = "model.bin"

    func testAWorkerCountBeyondTheBoundIsAUsageErrorNamingIt() throws {
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "100000"],
                                     environment: environment(), hint: "fetchd")
        XCTAssertTrue(waitForExit(p, timeout: 15), "it exits at once")
        XCTAssertEqual(p.terminationStatus, 64, contents(err))
        XCTAssertTrue(contents(err).contains("--workers needs a number from 1 to 256, not '100000'"), contents(err))
        XCTAssertFalse(FileManager.default.fileExists(atPath: spoolPath("supervisors")), "it never served")
    }

    /// `ulimit -n 64` under a shell that holds a descriptor above it (as a terminal's may): no
    /// worker can be started (the spawn fails with EBADF). The daemon exits 1 saying so (and what
    /// to do), and a caller that handed it a request meanwhile finishes the download itself.
    func testADaemonThatCanStartNoWorkerExitsAndItsCallersFinishThemselves() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        let (p, _, err) = try launch(URL(fileURLWithPath: "/bin/bash"),
                                     ["-c", "exec 70</dev/null; ulimit -n 64 && exec \"$0\" --cache-base \"$1\" --workers 2",
                                      fetchdBinary.path, cacheBase.path],
                                     environment: environment(), hint: "fetchd")
        XCTAssertTrue(waitUntil(timeout: 15) { self.supervisorPid() == p.processIdentifier }, contents(err))
        let caller = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the daemon without workers exits: \(contents(err))")
        XCTAssertEqual(p.terminationStatus, 1, contents(err))
        XCTAssertTrue(contents(err).contains("no worker process could be started for \(spool.path)"), contents(err))
        XCTAssertTrue(contents(err).contains("LimitNOFILE="), "says what to do: \(contents(err))")
        XCTAssertTrue(waitForExit(caller.process, timeout: 30), "the caller does not hang: \(contents(caller.stderr))")
        XCTAssertEqual(caller.process.terminationStatus, 0, contents(caller.stderr))
        try assertSameBytes(repo, path)
    }
}
