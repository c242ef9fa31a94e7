// The supervisor's worker pool at its limits: a worker count beyond the bound is a usage error,
// and a daemon that can start no worker exits saying why instead of taking requests its callers
// wait on forever.
import Daemon
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

    /// A SIGTERM while the supervisor starts many workers (its flag is looked at before each
    /// spawn): the start ends at the next worker, not after all 256 of them (issue 32, D13). The
    /// flag turns true after the fifth worker started: five are drained, whatever the machine's speed.
    func testAStopDuringTheStartOfManyWorkersEndsTheStart() throws {
        let looks = FlagLooks(falseFor: 6)  // the loop's first look, then one before each of five spawns
        let lines = LogLines()
        let supervisor = try Supervisor(cacheBase: cacheBase, workers: 256, slots: 1,
                                        workerCommand: ["/bin/sh", "-c", "exec sleep 60"],
                                        environment: environment(), log: { lines.add($0) })
        try supervisor.run(shouldStop: { looks.next() })
        XCTAssertTrue(lines.all.contains("draining 5 workers"), lines.all.joined(separator: "\n"))
        XCTAssertTrue(lines.all.contains("stopped"), lines.all.joined(separator: "\n"))
    }
}

/// A stop flag that reads false for its first `falseFor` looks, then true.
private final class FlagLooks: @unchecked Sendable {
    private let lock = NSLock()
    private var looks = 0
    private let falseFor: Int
    init(falseFor: Int) { self.falseFor = falseFor }
    func next() -> Bool { lock.withLock { looks += 1; return looks > falseFor } }
}

/// The supervisor's log lines, kept for the test to read.
private final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
