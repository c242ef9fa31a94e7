// The daemon as a user meets it: --detach names the daemon it started, one log line per request,
// attached clients told at once when the daemon goes, a second daemon on one base refused,
// `speech cancel`, `speech stop`, and the systemd unit.
import Foundation
import ModelCache
import TestHub
@testable import TestSupport
import XCTest

final class DaemonCommandLineTests: DaemonTestCase {
    let repo = "org/Served"
    let path = "weights/model.bin"
    var file: String { "\(repo)/\(path)" }

    func makeRepo(size: Int = 2 << 20) throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{}".utf8)])
    }

    func testDetachPrintsTheDaemonsPidAndLogPath() throws {
        try makeRepo()
        let (p, out, err) = try speech(["download", repo, "--detach", "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30))
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        XCTAssertEqual(contents(out), modelDir(repo).path + "\n", "stdout is the directory the daemon fills")
        let text = contents(err)
        guard let pid = supervisorPid() else { return XCTFail("no daemon serves the base: \(text)") }
        adoptStranger(pid)
        let log = spoolPath("fetchd-\(environment()["SPEECH_FETCH_NODE"] ?? ProcessInfo.processInfo.hostName).log")
        XCTAssertTrue(text.contains("started speech-fetchd (pid \(pid), log "), "the pid the daemon serves with: \(text)")
        XCTAssertTrue(text.contains("`speech wait \(repo) --cache-base \(cacheBase.path)`"), "the hint repeats the base: \(text)")
        let logPath = text.components(separatedBy: ", log ").dropFirst().first?.components(separatedBy: ")").first ?? ""
        XCTAssertTrue(FileManager.default.fileExists(atPath: logPath), "the log path printed exists: \(logPath) (\(log))")
    }

    func testStopEndsTheDaemonADetachedDownloadStartedAndSaysSo() throws {
        try makeRepo()
        let (p, out, err) = try speech(["download", repo, "--detach", "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30))
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        guard let pid = supervisorPid() else { return XCTFail("no daemon serves the base: \(contents(out))") }
        adoptStranger(pid)
        XCTAssertTrue(contents(err).contains("runs until `speech stop --cache-base \(cacheBase.path)`"), contents(err))
        let workers = descendants(of: pid)
        let stop = try speech(["stop", "--cache-base", cacheBase.path], hint: "stop")
        XCTAssertTrue(waitForExit(stop.process, timeout: 40))
        XCTAssertEqual(stop.process.terminationStatus, 0, contents(stop.stderr))
        XCTAssertTrue(contents(stop.stdout).contains("stopped speech-fetchd (pid \(pid)) serving \(cacheBase.path) after "), contents(stop.stdout))
        XCTAssertFalse(isAlive(pid), "the supervisor is gone when stop returns")
        XCTAssertTrue(waitUntil(timeout: 5) { workers.allSatisfy { !self.isAlive($0) } }, "its workers drained with it")
        XCTAssertNil(supervisorPid(), "it retired its record")
        var info = stat()
        XCTAssertEqual(stat(spool.path, &info), 0)
        let inRAM = "/dev/shm/speech-fetch-\(getuid())-\(info.st_dev)-\(info.st_ino)"
        XCTAssertFalse(FileManager.default.fileExists(atPath: inRAM), "the drain removed the spool's folder in RAM: \((try? FileManager.default.contentsOfDirectory(atPath: inRAM)) ?? [])")
        // Nothing left to stop: said, exit 0 (as systemctl stop of a stopped unit).
        let again = try speech(["stop", "--cache-base", cacheBase.path], hint: "stop-again")
        XCTAssertTrue(waitForExit(again.process, timeout: 15))
        XCTAssertEqual(again.process.terminationStatus, 0, contents(again.stderr))
        XCTAssertTrue(contents(again.stdout).contains("nothing to stop"), contents(again.stdout))
        // And the next download resumes as usual.
        let next = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "after")
        XCTAssertTrue(waitForExit(next.process, timeout: 30))
        XCTAssertEqual(next.process.terminationStatus, 0, contents(next.stderr))
        try assertSameBytes(repo, path)
    }

    func testStopLeavesAStaleRecordsReusedPidAlone() throws {
        // The record names a live process that is not speech-fetchd (a daemon killed, its pid
        // reused): nothing is signalled.
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        track(sleeper)
        let (daemon, _) = try startDaemon(workers: 1)
        let killed = [daemon.processIdentifier] + descendants(of: daemon.processIdentifier)
        for pid in killed { kill(pid, SIGKILL) }
        XCTAssertTrue(waitUntil(timeout: 5) { killed.allSatisfy { !self.isAlive($0) } })
        let node = try XCTUnwrap(names("supervisors").first, "a killed supervisor leaves its record")
        try Data("\(sleeper.processIdentifier)".utf8).write(to: URL(fileURLWithPath: spoolPath("supervisors/\(node)")))
        let stop = try speech(["stop", "--cache-base", cacheBase.path], hint: "stop")
        XCTAssertTrue(waitForExit(stop.process, timeout: 15))
        XCTAssertEqual(stop.process.terminationStatus, 0, contents(stop.stderr))
        XCTAssertTrue(contents(stop.stdout).contains("nothing to stop"), contents(stop.stdout))
        XCTAssertTrue(sleeper.isRunning, "the process the stale record names was not signalled")
    }

    func testTheDaemonLogsOneLinePerRequestAcceptedDoneAndFailed() throws {
        try makeRepo()
        try TestHub.generateRepo(root: root, repo: "org/Broken", files: [path: 1 << 20])
        hub.setFault(.status(code: 404, times: 100, retryAfter: nil), for: "org/Broken/\(path)")
        hub.setFault(.status(code: 503, times: 1, retryAfter: nil), for: file)  // one retry, logged
        let daemon = try startDaemon(workers: 1, slots: 2)
        let good = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(good.process, timeout: 30))
        XCTAssertEqual(good.process.terminationStatus, 0, contents(good.stderr))
        let bad = try speech(["download", "org/Broken", "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(bad.process, timeout: 30))
        XCTAssertEqual(bad.process.terminationStatus, 1, contents(bad.stderr))
        waitUntil(timeout: 5) { self.contents(daemon.log).contains("failed org/Broken") }
        let lines = contents(daemon.log).split(separator: "\n")
        XCTAssertEqual(lines.filter { $0.contains("accepted \(repo) @") }.count, 1, contents(daemon.log))
        XCTAssertEqual(lines.filter { $0.contains("done \(repo) (request") && $0.contains("2.0 MiB in") }.count, 1, contents(daemon.log))
        XCTAssertEqual(lines.filter { $0.contains("failed org/Broken") && $0.contains("404") }.count, 1, contents(daemon.log))
        XCTAssertEqual(lines.filter { $0.contains("HTTP 503") && $0.contains("retrying, attempt 2 of 5") }.count, 1,
                       "the worker's retry is logged: \(contents(daemon.log))")
    }

    func testAnAttachedClientSaysAtOnceWhenTheDaemonGoesAndFinishesItself() throws {
        try makeRepo(size: 4 << 20)
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: file)  // 2 workers: ~4 s in all
        let daemon = try startDaemon(workers: 2, slots: 1)
        let client = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitUntil(timeout: 15) { !self.names("parts").isEmpty || self.sidecar(self.repo, self.path).map { !$0.done.isEmpty } ?? false },
                      "a first range arrives")
        let stopped = Date()
        kill(daemon.process.processIdentifier, SIGTERM)
        let said = waitUntil(timeout: 10) { self.contents(client.stderr).contains("speech-fetchd is gone") }
        let gap = Date().timeIntervalSince(stopped)
        print("the client said the daemon was gone \(String(format: "%.2f", gap)) s after SIGTERM")
        XCTAssertTrue(said, "told at once (not after the 30 s lease): \(contents(client.stderr))")
        XCTAssertTrue(contents(client.stderr).contains("finishes the transfer itself"), contents(client.stderr))
        XCTAssertTrue(waitForExit(client.process, timeout: 30))
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
    }

    func testASecondDaemonOnOneBaseSaysAnotherServesItAndExits() throws {
        let first = try startDaemon(workers: 1, slots: 1)
        let (second, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "1"],
                                          environment: environment(), hint: "fetchd-second")
        XCTAssertTrue(waitForExit(second, timeout: 15), "the second daemon exits")
        XCTAssertEqual(second.terminationStatus, 1, contents(err))
        XCTAssertTrue(contents(err).contains("another speech-fetchd (pid \(first.process.processIdentifier)) already serves"), contents(err))
        XCTAssertTrue(first.process.isRunning, "the first one serves on")
        XCTAssertEqual(supervisorPid(), first.process.processIdentifier)
    }

    /// The record is taken with link(2), not checked then written, so of two
    /// daemons started at the same instant exactly one serves (three rounds).
    func testTwoDaemonsStartedAtOnceOneServes() throws {
        for round in 0..<3 {
            let a = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "1"], environment: environment(), hint: "fetchd-a\(round)")
            let b = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "1"], environment: environment(), hint: "fetchd-b\(round)")
            XCTAssertTrue(waitUntil(timeout: 20) { !a.process.isRunning || !b.process.isRunning }, "one of the two exits")
            let (winner, loser) = a.process.isRunning ? (a, b) : (b, a)
            XCTAssertTrue(waitForExit(loser.process, timeout: 10))
            XCTAssertEqual(loser.process.terminationStatus, 1, contents(loser.stderr))
            XCTAssertTrue(contents(loser.stderr).contains("another speech-fetchd (pid \(winner.process.processIdentifier)) already serves"),
                          contents(loser.stderr))
            usleep(300_000)
            XCTAssertTrue(winner.process.isRunning, "the other one serves: \(contents(winner.stderr))")
            XCTAssertEqual(supervisorPid(), winner.process.processIdentifier)
            kill(winner.process.processIdentifier, SIGTERM)
            XCTAssertTrue(waitForExit(winner.process, timeout: 20))
        }
    }

    func testCancelWithdrawsTheRequestWaitersSeeCancelledAndStagedBytesAreKept() throws {
        try makeRepo(size: 4 << 20)
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: file)  // far longer than the test
        _ = try startDaemon(workers: 1, slots: 1)
        let client = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitUntil(timeout: 20) { self.sidecar(self.repo, self.path).map { !$0.done.isEmpty } ?? false },
                      "a first range of the weights is staged")
        let waiter = try speech(["wait", repo, "--cache-base", cacheBase.path], hint: "wait")
        let cancel = try speech(["cancel", repo, "--cache-base", cacheBase.path], hint: "cancel")
        XCTAssertTrue(waitForExit(cancel.process, timeout: 15))
        XCTAssertEqual(cancel.process.terminationStatus, 0, contents(cancel.stderr))
        XCTAssertTrue(contents(cancel.stdout).contains("cancelled \(repo)"), contents(cancel.stdout))
        for (name, p) in [("download", client), ("wait", waiter)] {
            XCTAssertTrue(waitForExit(p.process, timeout: 10), "\(name) returns at once")
            XCTAssertEqual(p.process.terminationStatus, 1, "\(name): \(contents(p.stderr))")
            XCTAssertTrue(contents(p.stderr).contains("cancelled"), "\(name): \(contents(p.stderr))")
        }
        let kept = sidecar(repo, path)
        let staging = ModelDirectory(modelDir(repo)).stagingDirectory.path
        XCTAssertFalse(kept?.done.isEmpty ?? true, "the ranges fetched before the cancel stay staged: "
                       + "\(String(describing: kept)) in \((try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? [])")
        XCTAssertEqual(run(["cancel", repo, "--cache-base", cacheBase.path]), 1, "nothing left to cancel")
    }

    func testTheSystemdUnitVerifiesCleanlyAndIsHardened() throws {
        let unit = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("dist/systemd/speech-fetchd.service")
        let text = try String(contentsOf: unit, encoding: .utf8)
        for directive in ["ExecStart=/usr/local/bin/speech-fetchd --cache-base /var/cache/speech-fetch", "KillSignal=SIGTERM",
                          "KillMode=mixed", "Restart=on-failure", "RestartPreventExitStatus=64", "NoNewPrivileges=yes",
                          "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=\n",
                          "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "SystemCallFilter=@system-service",
                          "CacheDirectory=speech-fetch"] {
            XCTAssertTrue(text.contains(directive), "the unit has \(directive)")
        }
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else {
            throw XCTSkip("systemd-analyze is not installed here: the unit's syntax was not verified")
        }
        // verify checks that ExecStart's program exists: point it at this build's speech-fetchd.
        let copy = temp.appendingPathComponent("speech-fetchd.service")
        try FileManager.default.createDirectory(at: temp, withIntermediateDirectories: true)
        try text.replacingOccurrences(of: "/usr/local/bin/speech-fetchd", with: fetchdBinary.path)
            .write(to: copy, atomically: true, encoding: .utf8)
        let (p, out, err) = try launch(URL(fileURLWithPath: analyze), ["verify", copy.path],
                                       environment: ProcessInfo.processInfo.environment, hint: "systemd-analyze")
        XCTAssertTrue(waitForExit(p, timeout: 60))
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        // verify only warns about an unknown or misspelt directive: any message is a defect.
        XCTAssertEqual(contents(err).trimmingCharacters(in: .whitespacesAndNewlines), "", "systemd-analyze verify: \(contents(err))")
        XCTAssertEqual(contents(out).trimmingCharacters(in: .whitespacesAndNewlines), "")
    }

    /// Runs speech to its end; its exit status.
    func run(_ arguments: [String]) -> Int32 {
        guard let (p, _, _) = try? speech(arguments, hint: "run") else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }
}
