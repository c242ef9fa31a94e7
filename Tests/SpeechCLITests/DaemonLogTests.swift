// The log of a detached daemon as an operator rotates it: rename the file, send SIGHUP, and the
// supervisor and its workers write their next lines to a new file of the same name; a daemon
// without a log file (systemd's, logging to the journal) lives through SIGHUP.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class DaemonLogTests: DaemonTestCase {
    let repo = "org/Logged"

    /// Where file descriptor 2 of `pid` points ("" when it cannot be read).
    func stderrTarget(_ pid: pid_t) -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/2")) ?? ""
    }

    func testSIGHUPReopensTheLogOfADetachedDaemonAfterItWasRenamed() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["a.bin": 1 << 20])
        let (p, out, err) = try speech(["download", repo, "--detach", "--cache-base", cacheBase.path, "--json"])
        XCTAssertTrue(waitForExit(p, timeout: 30))
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        guard let pid = supervisorPid() else { return XCTFail("no daemon serves the base: \(contents(out))") }
        adoptStranger(pid)
        let log = try XCTUnwrap(contents(out).split(separator: "\n").compactMap { line -> String? in
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return object?["daemonLog"] as? String
        }.first, contents(out))
        XCTAssertTrue(waitUntil(timeout: 30) { self.contents(URL(fileURLWithPath: log)).contains("done \(self.repo) (request") },
                      "the detached daemon logs to \(log):\n\(contents(URL(fileURLWithPath: log)))")
        let workers = descendants(of: pid)
        XCTAssertFalse(workers.isEmpty)
        XCTAssertTrue(waitUntil(timeout: 10) { ([pid] + workers).allSatisfy(self.catchesSIGHUP) })
        for worker in [pid] + workers { XCTAssertEqual(stderrTarget(worker), log, "process \(worker) writes to the log") }

        // logrotate's way: rename, then SIGHUP to the supervisor.
        let rotated = log + ".1"
        XCTAssertEqual(rename(log, rotated), 0)
        XCTAssertEqual(kill(pid, SIGHUP), 0)
        XCTAssertTrue(waitUntil(timeout: 10) { self.contents(URL(fileURLWithPath: log)).contains("reopened the log \(log) (SIGHUP)") },
                      "the supervisor's next line is in a new \(log); the old one:\n\(contents(URL(fileURLWithPath: rotated)))")
        XCTAssertTrue(waitUntil(timeout: 10) { workers.allSatisfy { self.stderrTarget($0) == log } },
                      "every worker reopened it too: \(workers.map(stderrTarget))")
        var info = stat()
        XCTAssertEqual(lstat(log, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600, "the new log is private, as the spool is")

        // The next request's lines land in the new file only.
        try TestHub.generateRepo(root: root, repo: "org/Later", files: ["b.bin": 1 << 20])
        let later = try speech(["download", "org/Later", "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(later.process, timeout: 30))
        XCTAssertEqual(later.process.terminationStatus, 0, contents(later.stderr))
        XCTAssertTrue(waitUntil(timeout: 10) { self.contents(URL(fileURLWithPath: log)).contains("done org/Later (request") },
                      contents(URL(fileURLWithPath: log)))
        XCTAssertTrue(contents(URL(fileURLWithPath: log)).contains("accepted org/Later @"))
        XCTAssertFalse(contents(URL(fileURLWithPath: rotated)).contains("org/Later"), "nothing more goes to the renamed file")
        XCTAssertTrue(contents(URL(fileURLWithPath: rotated)).contains("done \(repo) (request"), "the old lines stay in it")
    }

    /// True once `pid` has a handler for SIGHUP (SigCgt in /proc/PID/status): a process that
    /// has just been started may not have reached it yet.
    func catchesSIGHUP(_ pid: pid_t) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
              let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16) else { return false }
        return mask & (1 << (UInt64(SIGHUP) - 1)) != 0
    }

    func testADaemonWithoutALogFileLivesThroughSIGHUP() throws {
        let daemon = try startDaemon(workers: 1, slots: 1)
        let supervisor = daemon.process.processIdentifier
        let worker = try XCTUnwrap(descendants(of: supervisor).first)
        XCTAssertTrue(waitUntil(timeout: 10) { self.catchesSIGHUP(supervisor) && self.catchesSIGHUP(worker) },
                      "both processes handle SIGHUP once started")
        XCTAssertEqual(kill(supervisor, SIGHUP), 0)
        XCTAssertEqual(kill(worker, SIGHUP), 0)
        try TestHub.generateRepo(root: root, repo: repo, files: ["a.bin": 1 << 20])
        let client = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(client.process, timeout: 30))
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        XCTAssertTrue(daemon.process.isRunning, "SIGHUP did not end the supervisor: \(contents(daemon.log))")
        XCTAssertEqual(kill(worker, 0), 0, "nor its worker")
        XCTAssertTrue(waitUntil(timeout: 10) { self.contents(daemon.log).contains("done \(self.repo) (request") },
                      "it went on logging to its stderr: \(contents(daemon.log))")
    }

    func testALogFileThatCannotBeOpenedStopsTheDaemonSayingWhich() throws {
        let bad = temp.appendingPathComponent("no-such-dir/fetchd.log").path
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--log", bad], environment: environment(), hint: "bad")
        XCTAssertTrue(waitForExit(p, timeout: 15))
        XCTAssertEqual(p.terminationStatus, 1)
        XCTAssertTrue(contents(err).contains("cannot open the log file \(bad) for appending"), contents(err))
        XCTAssertFalse(FileManager.default.fileExists(atPath: spoolPath("supervisors")) && !names("supervisors").isEmpty,
                       "it never served the base")
        let (empty, _, emptyErr) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--log", ""], environment: environment(), hint: "empty")
        XCTAssertTrue(waitForExit(empty, timeout: 15))
        XCTAssertEqual(empty.terminationStatus, 64, contents(emptyErr))
        XCTAssertTrue(contents(emptyErr).contains("--log needs a value"), contents(emptyErr))
    }

    /// A download handed to the daemon at `supervisor`: it succeeds, and the supervisor and the
    /// worker it had all live on (a failed log write is dropped, never a crash).
    func assertServesADownload(_ supervisor: Process, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertTrue(waitUntil(timeout: 15) {
            self.supervisorPid() == supervisor.processIdentifier && !self.descendants(of: supervisor.processIdentifier).isEmpty
        }, "speech-fetchd serves the base", file: file, line: line)
        let workers = descendants(of: supervisor.processIdentifier)
        try TestHub.generateRepo(root: root, repo: repo, files: ["a.bin": 1 << 20, "b.bin": 300_000])
        let client = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(client.process, timeout: 30), file: file, line: line)
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr), file: file, line: line)
        XCTAssertTrue(contents(client.stderr).contains("speech-fetchd"), "the daemon hosted it: \(contents(client.stderr))", file: file, line: line)
        try assertSameBytes(repo, "a.bin", file: file, line: line)
        try assertSameBytes(repo, "b.bin", file: file, line: line)
        XCTAssertTrue(supervisor.isRunning, "the supervisor lives on", file: file, line: line)
        for worker in workers { XCTAssertEqual(kill(worker, 0), 0, "worker \(worker) lives on", file: file, line: line) }
    }

    func testADaemonWhoseLogFileIsFullKeepsServing() throws {
        // /dev/full: every write fails with ENOSPC, as on a full log filesystem.
        let (p, _, _) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "1", "--slots", "2", "--log", "/dev/full"],
                                   environment: environment(), hint: "full")
        try assertServesADownload(p)
    }

    func testADaemonWhoseStderrPipeIsClosedWithSIGPIPEIgnoredKeepsServing() throws {
        // systemd's default: SIGPIPE ignored, so a write to a pipe nobody reads fails with EPIPE.
        let pipe = Pipe()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "trap '' PIPE && exec \"$0\" \"$@\"", fetchdBinary.path,
                       "--cache-base", cacheBase.path, "--workers", "1", "--slots", "2"]
        p.environment = environment()
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = pipe
        p.standardError = pipe
        track(p)
        try p.run()
        try pipe.fileHandleForReading.close()
        try? pipe.fileHandleForWriting.close()
        try assertServesADownload(p)
    }
}
