// speech-fetchd, speech wait and the spool with real processes, real SIGKILL and real files
// against the in-process test Hub.
@testable import Daemon
import Digest
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class DaemonTests: DaemonTestCase {
    let repo = "org/Daemon"
    let path = "model.safetensors"
    let rangeSize = 256 << 10
    var file: String { "\(repo)/\(path)" }
    var base: String { cacheBase.path }

    // MARK: 1

    func testDaemonHostedDownloadVerifiesAndServesEachByteOnce() throws {
        let size = 6 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        try startDaemon(workers: 2, slots: 4)

        let started = Date()
        let result = try download(repo)
        let seconds = Date().timeIntervalSince(started)
        print("daemon-hosted download of 6 MiB on loopback: \(String(format: "%.2f", seconds)) s")

        XCTAssertTrue(result.handedOver, "a daemon serves the base: the call hands its request over")
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: file), size, "each byte served once")
        XCTAssertEqual(overlap(hub.servedRanges(for: file)), 0, "no range served twice")

        // A publisher unlinks its claim just after renaming its part, so give the spool a moment.
        waitUntil(timeout: 2) { self.names("jobs/claimed").isEmpty }
        XCTAssertEqual(names("jobs/ready"), [], "no ready jobs left")
        XCTAssertEqual(names("jobs/claimed"), [], "no claims left")
        XCTAssertEqual(names("parts"), [], "no parts left")
        XCTAssertEqual(names("plans"), [], "no plans left")
        let requests = names("requests")
        XCTAssertEqual(requests.count, 1, "one request: \(requests)")
        if let request = requests.first {
            XCTAssertEqual(names("done"), [String(request.dropLast(".json".count))], "the request is marked done")
        }
        XCTAssertEqual(names("failed"), [])
        // Its time is printed, not asserted (a timed test fails on a loaded machine: 3.03 s once
        // against a 3 s bound); what a handover costs is bench scenario 4's ratio, measured against
        // the embedded engine in one run (docs/benchmarks.md).
    }

    // MARK: 2

    func testKilledWorkerMidRangeIsRevokedAndAnotherFinishes() throws {
        let size = 4 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: file)  // 0.25 s per range
        let daemon = try startDaemon()
        let workers = Set(descendants(of: daemon.process.processIdentifier))

        let client = try speech(["download", repo, "--cache-base", base], hint: "download")
        guard let (victim, job) = firstClaim(by: workers), let index = PlannedFile.parseJob(job)?.index else {
            return XCTFail("no worker claimed a job; daemon log:\n\(contents(daemon.log))")
        }
        usleep(100_000)  // some of its range has arrived, most has not
        XCTAssertEqual(kill(victim, SIGKILL), 0)
        let servedAtKill = hub.bodyBytes(for: file)

        XCTAssertTrue(waitForExit(client.process, timeout: 20), "the download finished")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
        XCTAssertFalse(isAlive(victim))

        let total = hub.bodyBytes(for: file)
        print("killed worker \(victim) on range \(index); served \(servedAtKill) bytes before the kill, \(total) in all for \(size)")
        XCTAssertLessThanOrEqual(total, size + rangeSize, "at most the killed range twice")
        let range = index * rangeSize ..< min(size, (index + 1) * rangeSize)
        let bodies = hub.servedRanges(for: file).filter { $0.overlaps(range) }
        XCTAssertLessThanOrEqual(bodies.count, 2, "the killed range was served at most twice: \(bodies)")
        XCTAssertTrue(contents(daemon.log).contains("revoked"), "the supervisor revoked the dead claim:\n\(contents(daemon.log))")
        XCTAssertTrue(waitUntil(timeout: 5) { self.descendants(of: daemon.process.processIdentifier).count >= 3 },
                      "the supervisor replaced the dead worker")
    }

    /// The download `client` ran ends well with the file's bytes, and the range `index` (of
    /// `rangeSize`) was asked for twice: the second time from at least the `held` bytes its gone
    /// holder's part had, to the range's end.
    private func assertRangeAskedAgainFromWhereItsPartEnded(_ client: (process: Process, stdout: URL, stderr: URL), _ finished: String,
                                                           index: Int, rangeSize: Int, size: Int, held: Int, who: String, gone: String,
                                                           file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertTrue(waitForExit(client.process, timeout: 30), "\(finished): \(contents(client.stderr))", file: file, line: line)
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr), file: file, line: line)
        try assertSameBytes(repo, path)
        let range = index * rangeSize ..< min(size, (index + 1) * rangeSize)
        let bodies = hub.servedRanges(for: self.file).filter { $0.overlaps(range) }
        print("\(gone) on range \(index) holding \(held) bytes; bodies of the range: \(bodies)")
        XCTAssertEqual(bodies.count, 2, "the range was asked for twice: \(bodies)", file: file, line: line)
        if let resumed = bodies.last {
            XCTAssertGreaterThanOrEqual(resumed.lowerBound, range.lowerBound + held,
                                        "\(who) asked only for the bytes after the \(held) the part held", file: file, line: line)
            XCTAssertEqual(resumed.upperBound, range.upperBound, file: file, line: line)
        }
    }

    func testSilentWorkerLosesItsClaimWhenTheLeaseExpires() throws {
        let size = 4 << 20
        let lease = ["SPEECH_FETCH_LEASE_SECONDS": "2"]
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: file)  // 0.25 s per range
        let daemon = try startDaemon(extra: lease)
        let workers = Set(descendants(of: daemon.process.processIdentifier))

        let client = try speech(["download", repo, "--cache-base", base], extra: lease, hint: "download")
        guard let (victim, job) = firstClaim(by: workers), let index = PlannedFile.parseJob(job)?.index else {
            return XCTFail("no worker claimed a job; daemon log:\n\(contents(daemon.log))")
        }
        usleep(100_000)
        // Alive but silent (a hung worker): only the lease can free its range.
        XCTAssertEqual(kill(victim, SIGSTOP), 0)
        let stoppedAt = Date()

        let finished = waitForExit(client.process, timeout: 10)
        print("worker \(victim) stopped on range \(index); download \(finished ? "finished" : "still waiting") "
              + "\(String(format: "%.2f", Date().timeIntervalSince(stoppedAt))) s later (lease 2 s); claims: \(names("jobs/claimed"))")
        XCTAssertTrue(finished, "the silent worker's claim was revoked after the lease and another worker finished the range")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        XCTAssertTrue(finalExists(repo, path))
        if finalExists(repo, path) { try assertSameBytes(repo, path) }
        XCTAssertLessThanOrEqual(hub.bodyBytes(for: file), size + rangeSize, "at most the silent worker's range twice")
    }

    // MARK: 3

    func testKilledSupervisorIsAdoptedOnRestart() throws {
        let size = 6 << 20
        let workerCount = 3
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: file)  // 3 workers: ~3 MiB/s
        let daemon = try startDaemon(workers: workerCount)

        let client = try speech(["download", repo, "--cache-base", base], hint: "download")
        XCTAssertTrue(waitUntil(timeout: 10) { !self.names("requests").isEmpty }, "the download wrote its request")
        let waiter = try speech(["wait", repo, "--cache-base", base], hint: "wait")

        XCTAssertTrue(waitUntil(timeout: 15) { (self.sidecar(self.repo, self.path)?.done.count ?? 0) >= 6 },
                      "ranges were spliced before the kill; daemon log:\n\(contents(daemon.log))")
        // kill -9 the supervisor and its workers at once.
        let supervisor = daemon.process.processIdentifier
        let workers = descendants(of: supervisor)
        for w in workers { adoptStranger(w) }
        kill(supervisor, SIGKILL)
        for w in workers { kill(w, SIGKILL) }
        daemon.process.waitUntilExit()
        XCTAssertTrue(waitUntil(timeout: 5) { workers.allSatisfy { !self.isAlive($0) } })
        let servedAtKill = hub.bodyBytes(for: file)
        // What is safe on disk: ranges in the sidecar and parts published (the waiting clients splice those).
        usleep(300_000)
        let kept = Set(sidecar(repo, path)?.done ?? []).union(rangeIndices(ofParts: names("parts")))
        let claimsAtKill = names("jobs/claimed")
        XCTAssertFalse(finalExists(repo, path), "the kill came mid-transfer")
        XCTAssertTrue(client.process.isRunning, "the download waits on")
        XCTAssertTrue(waiter.process.isRunning, "the waiter waits on")

        let restarted = try startDaemon(workers: workerCount)
        XCTAssertTrue(waitForExit(client.process, timeout: 20), "the download finished after the restart")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        XCTAssertTrue(waitForExit(waiter.process, timeout: 10), "the waiter woke")
        XCTAssertEqual(waiter.process.terminationStatus, 0, contents(waiter.stderr))
        try assertSameBytes(repo, path)

        let total = hub.bodyBytes(for: file)
        print("supervisor killed with \(kept.count) ranges safe and \(claimsAtKill.count) claims; served \(servedAtKill) before, \(total) in all for \(size)")
        XCTAssertLessThanOrEqual(total, size + workerCount * rangeSize, "at most the in-flight ranges twice")
        XCTAssertLessThanOrEqual(total - servedAtKill, size - kept.count * rangeSize,
                                 "the restarted supervisor did not fetch completed ranges again")
        if !claimsAtKill.isEmpty {
            XCTAssertTrue(contents(restarted.log).contains("revoked"),
                          "the dead workers' claims were revoked:\n\(contents(restarted.log))")
        }
    }

    /// After speech-fetchd and its workers are SIGKILLed, a caller waiting on
    /// its handed-over request judges the dead local supervisor and workers at once (their pids
    /// are gone) and finishes the transfer itself, instead of waiting out the lease (60 s here).
    func testCallerFinishesAtOnceWhenTheLocalDaemonWasKilled() throws {
        let size = 4 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: file)  // 3 workers: ~1.3 s in all
        let lease = ["SPEECH_FETCH_LEASE_SECONDS": "60"]
        let daemon = try startDaemon(extra: lease)
        let client = try speech(["download", repo, "--cache-base", base], extra: lease, hint: "download")
        let workers = Set(descendants(of: daemon.process.processIdentifier))
        XCTAssertNotNil(firstClaim(by: workers), "a worker claimed a range; daemon log:\n\(contents(daemon.log))")
        for w in workers { adoptStranger(w) }
        kill(daemon.process.processIdentifier, SIGKILL)
        for w in workers { kill(w, SIGKILL) }
        daemon.process.waitUntilExit()
        XCTAssertTrue(waitUntil(timeout: 5) { workers.allSatisfy { !self.isAlive($0) } })
        XCTAssertFalse(finalExists(repo, path), "the kill came mid-transfer")
        hub.clearFaults()

        // Well within the 60 s lease: only a caller that judged the dead pids at once gets here.
        XCTAssertTrue(waitForExit(client.process, timeout: 20),
                      "the caller took the transfer over without waiting out the lease: \(contents(client.stderr))")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
        XCTAssertLessThanOrEqual(hub.bodyBytes(for: file), size + 3 * rangeSize, "at most the ranges in flight twice")
    }

    /// Zero refetch after SIGKILL: when the daemon and its worker are killed mid-range,
    /// the caller that takes the transfer over copies the dead worker's unfinished part into its
    /// staging file (the range's recorded `partial`) and asks only for the rest of the range.
    func testCallerTakingOverFetchesOnlyTheTailOfADeadWorkersRange() throws {
        try assertCallerTakingOverFetchesOnlyTheTail(killingWorkers: true)
        XCTAssertEqual(names("tmp").filter { $0.hasPrefix("part-") }, [], "the dead worker's part went with the plan")
    }

    /// A worker whose supervisor was killed stops, leaving its unfinished part; the caller that
    /// takes the transfer over asks only for the rest of that range.
    func testWorkerOfAKilledSupervisorLeavesItsPartForTheCallerTakingOver() throws {
        try assertCallerTakingOverFetchesOnlyTheTail(killingWorkers: false)
    }

    /// Kills the daemon (and its workers, with `killingWorkers`; else the worker stops on its
    /// own, its parent gone) while a worker holds a quarter of its 1 MiB range, then checks that
    /// the caller taking over asks for that range once more, from the bytes the part held on.
    private func assertCallerTakingOverFetchesOnlyTheTail(killingWorkers: Bool) throws {
        let size = 2 << 20
        let bigRange = 1 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: file)  // 4 s per range
        let extra = ["HF_DOWNLOAD_RANGE_CHUNK": "\(bigRange)", "SPEECH_FETCH_LEASE_SECONDS": "60"]
        let daemon = try startDaemon(workers: 1, extra: extra)
        let client = try speech(["download", repo, "--cache-base", base], extra: extra, hint: "download")
        let workers = Set(descendants(of: daemon.process.processIdentifier))
        guard let (worker, job) = firstClaim(by: workers), let index = PlannedFile.parseJob(job)?.index else {
            return XCTFail("no worker claimed a job; daemon log:\n\(contents(daemon.log))")
        }
        let held = waitForProgressRecord(of: job, by: worker, holding: bigRange / 4).held
        for w in workers { adoptStranger(w) }
        kill(daemon.process.processIdentifier, SIGKILL)  // without killingWorkers, the worker sees its parent gone and stops
        if killingWorkers { for w in workers { kill(w, SIGKILL) } }
        daemon.process.waitUntilExit()
        XCTAssertTrue(waitUntil(timeout: 10) { workers.allSatisfy { !self.isAlive($0) } }, "the worker is gone")
        XCTAssertGreaterThanOrEqual(held, bigRange / 4, "the worker wrote part of its range before it was gone")
        hub.clearFaults()

        try assertRangeAskedAgainFromWhereItsPartEnded(client, "the caller took the transfer over", index: index, rangeSize: bigRange,
                                                       size: size, held: held, who: "the caller taking over", gone: "worker \(worker) gone")
    }

    /// Range indices of `parts/<key>.<index>.part` names.
    private func rangeIndices(ofParts names: [String]) -> Set<Int> {
        Set(names.compactMap { name in name.hasSuffix(".part") ? PlannedFile.parseJob(String(name.dropLast(5)))?.index : nil })
    }

    // MARK: 4

    func testOrphanPartIsSplicedByTheNextProcessThatLooks() throws {
        let size = 1 << 20  // 4 ranges
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        let (spool, plan) = try planByHand(repo, path, rangeSize: rangeSize)
        let bytes = try source(repo, path)

        // A worker fetched range 1, published its part and died before splicing it.
        try orphanPart(plan, 1, bytes, spool)
        let first = try speech(["wait", repo, "--cache-base", base, "--timeout", "1"], hint: "wait1")
        XCTAssertTrue(waitForExit(first.process, timeout: 10))
        XCTAssertEqual(first.process.terminationStatus, 2, "nothing else is in flight: it times out. \(contents(first.stderr))")
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.partPath(plan, 1)), "the waiter spliced the part")
        XCTAssertEqual(sidecar(repo, path)?.done, [1], "the sidecar lists the spliced range")

        // The others arrive the same way; the next waiter completes the file.
        for index in [0, 2, 3] { try orphanPart(plan, index, bytes, spool) }
        let second = try speech(["wait", repo, "--cache-base", base, "--timeout", "10"], hint: "wait2")
        XCTAssertTrue(waitForExit(second.process, timeout: 15))
        XCTAssertEqual(second.process.terminationStatus, 0, contents(second.stderr))
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: file), 0, "nothing was fetched: the parts were enough")
        XCTAssertEqual(names("parts"), [])
        XCTAssertEqual(names("plans"), [])
        XCTAssertEqual(names("done").count, 1, "the request is marked done")
    }

    func testOrphanPartIsAdoptedByANewEmbeddedDownload() throws {
        let size = 2 << 20  // 8 ranges
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        let (spool, plan) = try planByHand(repo, path, rangeSize: rangeSize)
        let bytes = try source(repo, path)
        for index in [2, 5] { try orphanPart(plan, index, bytes, spool) }

        // No daemon: `speech download` hosts the engine and first splices what it finds.
        let client = try speech(["download", repo, "--cache-base", base], hint: "download")
        XCTAssertTrue(waitForExit(client.process, timeout: 15))
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: file), size - 2 * rangeSize, "the two published parts were not fetched again")
        XCTAssertEqual(overlap(hub.servedRanges(for: file)), 0)
        XCTAssertEqual(names("parts"), [])
        XCTAssertEqual(names("plans"), [])
        XCTAssertEqual(names("jobs/ready"), [], "the embedded host retired the plan's jobs")
        XCTAssertEqual(names("done").count, 1, "the request is settled")
    }

    /// What a worker leaves when it dies right after publishing: the job gone from ready, the
    /// range's real bytes in `parts/<job>.part`.
    private func orphanPart(_ plan: PlannedFile, _ index: Int, _ bytes: Data, _ spool: Spool) throws {
        unlink(spool.layout.ready(plan.jobName(index)))
        let r = plan.range(index)
        let temp = spool.tempPath("part-\(plan.jobName(index))")
        try SpoolFS.writeNew(temp, bytes.subdata(in: Int(r.start) ..< Int(r.end) + 1))
        XCTAssertEqual(rename(temp, spool.partPath(plan, index)), 0)
    }

    // MARK: 5

    func testTwoDownloadsAndManyWaitersShareOneTransfer() throws {
        let size = 6 << 20
        let waiterCount = 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: file)  // 3 workers: ~4 s in all
        let daemon = try startDaemon()

        let exits = ExitClock()
        let downloads = try (0..<2).map { i in
            try speech(["download", repo, "--cache-base", base], hint: "download\(i)", onExit: { exits.mark($0) })
        }
        XCTAssertTrue(waitUntil(timeout: 10) { !self.names("requests").isEmpty }, "a request was written")

        // Each waiter runs under sh, whose `times` reports the waiter's own user and system CPU.
        let sh = URL(fileURLWithPath: "/bin/sh")
        let script = "\"$@\"; rc=$?; times >&2; exit $rc"
        var waiters: [(process: Process, stdout: URL, stderr: URL)] = []
        for i in 0..<waiterCount {
            waiters.append(try launch(sh, ["-c", script, "sh", speechBinary.path, "wait", repo, "--cache-base", base],
                                      environment: environment(), hint: "wait\(i)", onExit: { exits.mark($0) }))
        }
        let allStarted = Date()

        // CPU of each waiting `speech wait` process once it is up, and again when the file appears.
        usleep(300_000)
        var cpuBefore: [pid_t: Double] = [:]
        for w in waiters {
            for pid in descendants(of: w.process.processIdentifier) { cpuBefore[pid] = procStat(pid)?.cpu }
        }
        let sampledAt = Date()
        let final = modelDir(repo).appendingPathComponent(path).path
        XCTAssertTrue(waitUntil(timeout: 25, interval: 0.005) { FileManager.default.fileExists(atPath: final) },
                      "the file was finalized; daemon log:\n\(contents(daemon.log))")
        let appeared = Date()
        var waitingCPU: [Double] = []
        for (pid, before) in cpuBefore { if let now = procStat(pid)?.cpu { waitingCPU.append(now - before) } }

        for p in downloads.map(\.process) + waiters.map(\.process) {
            XCTAssertTrue(waitForExit(p, timeout: 10), "every process exits")
        }
        for (i, d) in downloads.enumerated() {
            XCTAssertEqual(d.process.terminationStatus, 0, "download \(i): \(contents(d.stderr))")
        }
        var cpu: [Double] = []
        var latency: [Double] = []
        for (i, w) in waiters.enumerated() {
            let err = contents(w.stderr)
            XCTAssertEqual(w.process.terminationStatus, 0, "waiter \(i): \(err)")
            if let seconds = childrenCPU(fromTimes: err) { cpu.append(seconds) } else { XCTFail("waiter \(i): no `times` output: \(err)") }
            if let exited = exits.time(of: w.process.processIdentifier) { latency.append(exited.timeIntervalSince(appeared)) }
        }
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: file), size, "each byte served once")
        XCTAssertEqual(overlap(hub.servedRanges(for: file)), 0)

        let c = medianAndMax(cpu)
        let l = medianAndMax(latency)
        let w = medianAndMax(waitingCPU)
        let ms = { (s: Double) in String(format: "%.0f ms", s * 1000) }
        print("""
            \(waiterCount) waiters, 2 downloads: transfer ended \(String(format: "%.2f", appeared.timeIntervalSince(allStarted))) s after the last waiter started
              waiter CPU, whole process (user+sys): median \(ms(c.median)), max \(ms(c.max))
              waiter CPU while waiting (\(String(format: "%.2f", appeared.timeIntervalSince(sampledAt))) s, /proc, 10 ms ticks): median \(ms(w.median)), max \(ms(w.max)), sum \(ms(waitingCPU.reduce(0, +)))
              wake latency, final rename → waiter exit: median \(ms(l.median)), max \(ms(l.max))
            """)
        XCTAssertEqual(cpu.count, waiterCount)
        XCTAssertLessThan(c.max, 0.5, "a waiter costs little CPU")
        XCTAssertEqual(latency.count, waiterCount)
        XCTAssertLessThan(l.max, 1.5, "every waiter woke promptly after the final rename")
        XCTAssertLessThan(sampledAt, appeared, "the waiters were sampled while the transfer was still going")
    }

    func testWaitersWithoutInotifyWakeOnTheWakeWord() throws {
        // SPEECH_FETCH_INOTIFY=0 puts the waiters where the per-user limit of inotify instances
        // puts waiters 129 and up: they sleep on spool/wake, bumped when done/ is published.
        // Their full pass is set to every 60 s, so without the word they would sleep through
        // this test's 10 s wait for their exit.
        let size = 4 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: file)  // 3 workers: ~3 s
        let daemon = try startDaemon()
        let exits = ExitClock()
        let download = try speech(["download", repo, "--cache-base", base, "--detach"], hint: "detach")
        XCTAssertTrue(waitForExit(download.process, timeout: 20), "--detach returns")
        XCTAssertEqual(download.process.terminationStatus, 0, contents(download.stderr))
        let waiters = try (0..<5).map { i in
            try speech(["wait", repo, "--cache-base", base], extra: ["SPEECH_FETCH_INOTIFY": "0", "SPEECH_FETCH_POLL_SECONDS": "60"], hint: "wait\(i)",
                       onExit: { exits.mark($0) })
        }
        let final = modelDir(repo).appendingPathComponent(path).path
        XCTAssertTrue(waitUntil(timeout: 25, interval: 0.005) { FileManager.default.fileExists(atPath: final) },
                      "the file was finalized; daemon log:\n\(contents(daemon.log))")
        let appeared = Date()
        for (i, w) in waiters.enumerated() {
            XCTAssertTrue(waitForExit(w.process, timeout: 10), "waiter \(i) exits")
            XCTAssertEqual(w.process.terminationStatus, 0, "waiter \(i): \(contents(w.stderr))")
            XCTAssertTrue(contents(w.stdout).contains("ready in"), "waiter \(i): \(contents(w.stdout))")
            let latency = exits.time(of: w.process.processIdentifier).map { $0.timeIntervalSince(appeared) }
            XCTAssertLessThan(latency ?? 99, 5, "waiter \(i) woke on the done marker, not on its 60 s pass")
        }
        try assertSameBytes(repo, path)
    }

    func testTheDaemonAndItsWorkersRunTheSpeechExecutableUnderTheirOwnName() throws {
        // One executable file for callers, supervisor and workers: its pages are shared, not
        // counted once per binary (docs/architecture.md, "Start-up"); ps and pgrep still say
        // speech-fetchd.
        let daemon = try startDaemon(workers: 2)
        let pids = [daemon.process.processIdentifier] + descendants(of: daemon.process.processIdentifier)
        XCTAssertEqual(pids.count, 3)
        let speech = speechBinary.resolvingSymlinksInPath().path
        func exe(_ pid: pid_t) -> String? {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")).map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        }
        for pid in pids {
            // A worker is started through speech-fetchd, which then executes speech: wait for that.
            XCTAssertTrue(waitUntil(timeout: 10) { exe(pid) == speech && self.contents(URL(fileURLWithPath: "/proc/\(pid)/comm")) == "speech-fetchd\n" },
                          "pid \(pid) runs \(exe(pid) ?? "?") as \(contents(URL(fileURLWithPath: "/proc/\(pid)/comm")))")
            XCTAssertTrue(commandLine(pid).contains("speech-fetchd"), commandLine(pid))
        }
    }

    func testSpeechFetchdWithoutSpeechBesideItRunsTheDaemonItself() throws {
        // Installed alone (here: copied into the test's directory), it serves the base anyway.
        let alone = temp.appendingPathComponent("alone", isDirectory: true)
        try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
        let copy = alone.appendingPathComponent("speech-fetchd")
        try FileManager.default.copyItem(at: fetchdBinary, to: copy)
        let (daemon, _, err) = try launch(copy, ["--cache-base", base, "--workers", "1"], environment: environment(), hint: "alone")
        let pid = daemon.processIdentifier
        XCTAssertTrue(waitUntil(timeout: 15) { self.supervisorPid() == pid && self.descendants(of: pid).count == 1 },
                      "it serves the base with its worker; log:\n\(contents(err))")
        for p in [pid] + descendants(of: pid) {
            let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(p)/exe")
            XCTAssertEqual(URL(fileURLWithPath: exe).standardizedFileURL.path, copy.resolvingSymlinksInPath().path, "pid \(p)")
        }
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        let download = try speech(["download", repo, "--cache-base", base], hint: "via-alone")
        XCTAssertTrue(waitForExit(download.process, timeout: 30), "the download through the daemon returns")
        XCTAssertEqual(download.process.terminationStatus, 0, contents(download.stderr))
        try assertSameBytes(repo, path)
    }

    func testCtrlCStopsAnEmbeddedDownloadAtOnceKeepingWhatArrived() throws {
        let size = 4 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 128 << 10), for: file)  // 4 connections: ~8 s in all
        let download = try speech(["download", repo, "--cache-base", base], hint: "embedded")
        XCTAssertTrue(waitUntil(timeout: 15) { (self.sidecar(self.repo, self.path)?.done.count ?? 0) >= 1 },
                      "a range was recorded: \(contents(download.stderr))")
        let recorded = sidecar(repo, path)?.done.count ?? 0
        kill(download.process.processIdentifier, SIGINT)
        XCTAssertTrue(waitForExit(download.process, timeout: 3), "SIGINT stops the transfer at once, not after it")
        XCTAssertEqual(download.process.terminationStatus, 130, contents(download.stderr))
        XCTAssertTrue(contents(download.stderr).contains("interrupted"), contents(download.stderr))
        XCTAssertFalse(finalExists(repo, path))
        XCTAssertGreaterThanOrEqual(sidecar(repo, path)?.done.count ?? 0, recorded, "the staged ranges are kept for a resume")
    }

    func testCtrlCStopsWaitersAtOnceAndTheTransferGoesOn() throws {
        // One waiter on inotify, one sleeping on the wake word with a 60 s pass: SIGINT ends
        // either sleep (EINTR), not their next pass.
        let size = 4 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 64 << 10), for: file)  // 3 workers: ~20 s
        let daemon = try startDaemon()
        let download = try speech(["download", repo, "--cache-base", base, "--detach"], hint: "detach")
        XCTAssertTrue(waitForExit(download.process, timeout: 20), "--detach returns")
        let waiters = [
            try speech(["wait", repo, "--cache-base", base], hint: "wait-inotify"),
            try speech(["wait", repo, "--cache-base", base], extra: ["SPEECH_FETCH_INOTIFY": "0", "SPEECH_FETCH_POLL_SECONDS": "60"],
                       hint: "wait-word"),
        ]
        XCTAssertTrue(waitUntil(timeout: 10) { waiters.allSatisfy { self.procStat($0.process.processIdentifier)?.state == "S" } },
                      "the waiters sleep")
        usleep(300_000)  // past their first pass, into the sleep
        for w in waiters { kill(w.process.processIdentifier, SIGINT) }
        for (i, w) in waiters.enumerated() {
            XCTAssertTrue(waitForExit(w.process, timeout: 1.5), "waiter \(i) stops at once")
            XCTAssertEqual(w.process.terminationStatus, 130, "waiter \(i): \(contents(w.stderr))")
            XCTAssertTrue(contents(w.stderr).contains("the transfer goes on"), contents(w.stderr))
        }
        XCTAssertTrue(isAlive(daemon.process.processIdentifier), "the daemon goes on")
        XCTAssertFalse(finalExists(repo, path), "the transfer was still going when the waiters stopped")
    }

    /// Seconds of user + system CPU of the children from sh's `times` (its second line: `0m0.030000s 0m0.010000s`).
    private func childrenCPU(fromTimes text: String) -> Double? {
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("0m") || $0.range(of: #"^\d+m[\d.]+s"#, options: .regularExpression) != nil }
        guard let line = lines.last else { return nil }
        let values = line.split(separator: " ").compactMap { field -> Double? in
            guard let m = field.firstIndex(of: "m"), field.hasSuffix("s"),
                  let minutes = Double(field[..<m]), let seconds = Double(field[field.index(after: m)...].dropLast()) else { return nil }
            return minutes * 60 + seconds
        }
        return values.count == 2 ? values[0] + values[1] : nil
    }

    // MARK: 6

    func testDetachedDownloadCompletesAfterTheCallerIsGone() throws {
        let size = 4 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: file)  // default 4 workers: ~2 s

        // The caller runs in a shell of its own session, as from a terminal; the shell is then killed.
        let script = "echo pgid=$$; \"$0\" download \"$1\" --cache-base \"$2\" --detach; echo returned=$?; exec sleep 60"
        let started = Date()
        let shell = try launch(URL(fileURLWithPath: "/usr/bin/setsid"), ["/bin/sh", "-c", script, speechBinary.path, repo, base],
                               environment: environment(), hint: "shell")
        var pgid: pid_t = 0
        var returned: Int32?
        waitUntil(timeout: 15) {
            let out = self.contents(shell.stdout)
            for line in out.split(separator: "\n") {
                if line.hasPrefix("pgid="), let v = pid_t(line.dropFirst(5)) { pgid = v }
                if line.hasPrefix("returned="), let v = Int32(line.dropFirst(9)) { returned = v }
            }
            return returned != nil
        }
        let took = Date().timeIntervalSince(started)
        if pgid > 0 { adoptStranger(pgid) }
        XCTAssertEqual(returned, 0, "download --detach returned 0; stderr:\n\(contents(shell.stderr))")
        print("download --detach returned after \(String(format: "%.2f", took)) s")
        XCTAssertLessThan(took, 5, "--detach returns at once")
        XCTAssertFalse(finalExists(repo, path), "the transfer was still going when the caller returned")
        guard let daemon = supervisorPid() else { return XCTFail("--detach started no daemon") }
        adoptStranger(daemon)
        XCTAssertTrue(commandLine(daemon).contains("speech-fetchd"), commandLine(daemon))
        XCTAssertNotEqual(getsid(daemon), pgid, "the daemon runs in a session of its own")

        // Kill the shell's whole session-leading group, as a closed terminal would.
        XCTAssertGreaterThan(pgid, 0)
        if pgid > 0 { kill(-pgid, SIGKILL) }
        XCTAssertTrue(isAlive(daemon), "the daemon outlived the caller's shell")

        let waiter = try speech(["wait", repo, "--cache-base", base, "--timeout", "20"], hint: "wait")
        XCTAssertTrue(waitForExit(waiter.process, timeout: 25))
        XCTAssertEqual(waiter.process.terminationStatus, 0, contents(waiter.stderr))
        print("the detached transfer completed \(String(format: "%.2f", Date().timeIntervalSince(started))) s after the caller started")
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: file), size)

        let again = Date()
        let later = try speech(["wait", repo, "--cache-base", base], hint: "wait-again")
        XCTAssertTrue(waitForExit(later.process, timeout: 5))
        XCTAssertEqual(later.process.terminationStatus, 0, contents(later.stderr))
        let answered = Date().timeIntervalSince(again)
        print("a later speech wait answered in \(String(format: "%.3f", answered)) s")
        XCTAssertLessThan(answered, 1, "a later wait returns at once")

        // Stop the daemon it started: SIGTERM drains.
        let workers = descendants(of: daemon)
        let stopAt = Date()
        kill(daemon, SIGTERM)
        XCTAssertTrue(waitUntil(timeout: 20) { !self.isAlive(daemon) }, "the daemon stops on SIGTERM")
        print("detached daemon drained in \(String(format: "%.2f", Date().timeIntervalSince(stopAt))) s")
        XCTAssertTrue(waitUntil(timeout: 5) { workers.allSatisfy { !self.isAlive($0) } }, "its workers are gone")
        XCTAssertEqual(names("supervisors"), [], "it retired its heartbeat")
        let logs = names("").filter { $0.hasPrefix("fetchd-") }
        XCTAssertEqual(logs.count, 1, "the detached daemon logs into the spool: \(names(""))")
    }

    // MARK: 7

    func testFailedRequestReachesEveryWaiter() throws {
        let size = 2 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        // Workers first get 503 with Retry-After: 1 (waiters have time to start), then 404 for good.
        hub.setFault(.status(code: 503, times: 3, retryAfter: 1), for: file)
        hub.setFault(.status(code: 404, times: 100, retryAfter: nil), for: file)
        let daemon = try startDaemon()
        try assertFailureReachesEveryone(daemon: daemon, clientExtra: [:])
    }

    func testGatedRequestFailureReachesEveryWaiter() throws {
        let size = 2 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setGated(repo, token: "hf_caller_only")
        // The caller holds the token and resolves; the daemon's node has none, so its workers are refused.
        let daemon = try startDaemon()
        try assertFailureReachesEveryone(daemon: daemon, clientExtra: ["HF_TOKEN": "hf_caller_only"], reason: "gated")
    }

    func testRequestAskedAgainAfterAFailureIsFetchedOnceTheCauseIsGone() throws {
        let size = 2 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.status(code: 404, times: 1000, retryAfter: nil), for: file)
        let daemon = try startDaemon()
        let first = try speech(["download", repo, "--cache-base", base], hint: "download1")
        XCTAssertTrue(waitForExit(first.process, timeout: 20))
        XCTAssertEqual(first.process.terminationStatus, 1, "the first round fails: \(contents(first.stderr))")

        // The file is back on the Hub; the same command, asked again, fetches it.
        hub.clearFaults()
        let second = try speech(["download", repo, "--cache-base", base], hint: "download2")
        XCTAssertTrue(waitForExit(second.process, timeout: 20))
        XCTAssertEqual(second.process.terminationStatus, 0,
                       "asked again, the request is planned afresh: \(contents(second.stderr))\ndaemon log:\n\(contents(daemon.log))")
        XCTAssertTrue(finalExists(repo, path))
        if finalExists(repo, path) { try assertSameBytes(repo, path) }
    }

    private func assertFailureReachesEveryone(daemon: (process: Process, log: URL), clientExtra: [String: String],
                                              reason: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws {
        let client = try speech(["download", repo, "--cache-base", base], extra: clientExtra, hint: "download")
        XCTAssertTrue(waitUntil(timeout: 10) { !self.names("requests").isEmpty }, "the download wrote its request: \(contents(client.stderr))",
                      file: file, line: line)
        let waiters = try (0..<3).map { i in try speech(["wait", repo, "--cache-base", base, "--timeout", "20"], hint: "wait\(i)") }
        let waitersStartedBeforeFailure = names("failed").isEmpty
        for p in [client.process] + waiters.map(\.process) {
            XCTAssertTrue(waitForExit(p, timeout: 25), "every process exits", file: file, line: line)
        }
        print("failure: waiters started \(waitersStartedBeforeFailure ? "before" : "after") the request failed")
        for (name, p) in [("download", client)] + waiters.enumerated().map({ ("waiter \($0.offset)", $0.element) }) {
            let err = contents(p.stderr)
            XCTAssertNotEqual(p.process.terminationStatus, 0, "\(name) fails", file: file, line: line)
            XCTAssertNotEqual(p.process.terminationStatus, 2, "\(name) did not merely time out: \(err)", file: file, line: line)
            XCTAssertTrue(err.contains(path), "\(name) names the file: \(err)", file: file, line: line)
            if let reason { XCTAssertTrue(err.contains(reason), "\(name) says why (\(reason)): \(err)", file: file, line: line) }
        }
        print("download said: \(contents(client.stderr).trimmingCharacters(in: .whitespacesAndNewlines))")
        XCTAssertEqual(names("failed").count, 1, "the request is marked failed", file: file, line: line)
        XCTAssertEqual(names("plans"), [], file: file, line: line)
        XCTAssertEqual(names("jobs/ready"), [], file: file, line: line)
        XCTAssertFalse(finalExists(repo, path), file: file, line: line)
    }

    // MARK: 8

    func testSpoolIsPrivateFollowsNoSymlinkAndHoldsNoToken() throws {
        let secret = "hf_secret_123"
        let size = 2 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setGated(repo, token: secret)

        // A request planted as a symlink to a file outside the spool, valid in every other way.
        let evilRepo = "org/Evil"
        try TestHub.generateRepo(root: root, repo: evilRepo, files: [path: 2 << 20])
        let evilID = try RepoID(evilRepo)
        let evilSnapshot = try downloader().client.snapshot(of: evilID, revision: "main")
        let evilDir = temp.appendingPathComponent("elsewhere/models/org/Evil")
        let evilRequest = SpoolRequest(repo: evilRepo, revision: "main", commit: evilSnapshot.commit, modelDir: evilDir.path,
                                       files: evilSnapshot.files, node: DownloadSettings.fromEnvironment(environment()).node)
        let outside = temp.appendingPathComponent("outside/evil.json")
        try FileManager.default.createDirectory(at: outside.deletingLastPathComponent(), withIntermediateDirectories: true)
        let evilBytes = try JSONEncoder().encode(evilRequest)
        try evilBytes.write(to: outside)
        let outsideBefore = try FileManager.default.attributesOfItem(atPath: outside.path)
        _ = try Spool(base: cacheBase, node: "setup")
        XCTAssertEqual(symlink(outside.path, spoolPath("requests/evil.json")), 0)

        let daemon = try startDaemon(extra: ["HF_TOKEN": secret])
        let client = try speech(["download", repo, "--cache-base", base], extra: ["HF_TOKEN": secret], hint: "download")
        XCTAssertTrue(waitForExit(client.process, timeout: 20))
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
        sleep(2)  // two more supervisor passes over the planted request

        // Modes: directories 0700, files 0600.
        var checked = 0
        let fm = FileManager.default
        for sub in (fm.enumerator(atPath: spool.path)?.allObjects as? [String] ?? []) {
            let full = spool.appendingPathComponent(sub).path
            var st = stat()
            guard lstat(full, &st) == 0 else { continue }
            let mode = st.st_mode & 0o7777
            switch st.st_mode & S_IFMT {
            case S_IFDIR: XCTAssertEqual(mode, 0o700, "\(sub) is a directory of mode \(String(mode, radix: 8))")
            case S_IFREG: XCTAssertEqual(mode, 0o600, "\(sub) is a file of mode \(String(mode, radix: 8))")
            case S_IFLNK: XCTAssertEqual(sub, "requests/evil.json", "only the planted symlink")
            default: XCTFail("\(sub) has an unexpected type")
            }
            checked += 1
        }
        var st = stat()
        XCTAssertEqual(lstat(spool.path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o7777, 0o700, "the spool itself is 0700")
        XCTAssertGreaterThan(checked, 10)

        // No token anywhere in the cache base or the logs.
        var grepped = 0
        var places = (fm.enumerator(atPath: cacheBase.path)?.allObjects as? [String] ?? []).map { cacheBase.appendingPathComponent($0) }
        places += [daemon.log, client.stdout, client.stderr]
        for url in places {
            var s = stat()
            guard lstat(url.path, &s) == 0, (s.st_mode & S_IFMT) == S_IFREG, let data = fm.contents(atPath: url.path) else { continue }
            XCTAssertNil(data.range(of: Data(secret.utf8)), "\(url.path) holds the token")
            grepped += 1
        }
        XCTAssertGreaterThan(grepped, 5)
        XCTAssertFalse(contents(daemon.log).isEmpty, "the daemon logged something to grep")

        // The planted symlink was never followed: the outside file is untouched, nothing of it was planned or fetched.
        XCTAssertEqual(try Data(contentsOf: outside), evilBytes, "the symlink's target is unchanged")
        let outsideAfter = try fm.attributesOfItem(atPath: outside.path)
        XCTAssertEqual(outsideAfter[.modificationDate] as? Date, outsideBefore[.modificationDate] as? Date)
        XCTAssertEqual(hub.requests(for: "\(evilRepo)/\(path)"), 0, "nothing of the planted request was fetched")
        XCTAssertFalse(fm.fileExists(atPath: evilDir.path), "nothing was staged for the planted request")
        for plan in names("plans") {
            XCTAssertFalse(contents(URL(fileURLWithPath: spoolPath("plans/\(plan)"))).contains(evilRepo), "\(plan) plans the planted request")
        }
        XCTAssertFalse(names("done").contains(evilRequest.id))
        XCTAssertFalse(names("failed").contains(evilRequest.id + ".json"))
        XCTAssertTrue(daemon.process.isRunning, "the daemon is still serving")
    }
}

/// A waiter on a polled filesystem sleeps in its watcher, which another node's marker does not
/// wake: `SettledLook` looks at the markers every quarter poll interval and touches the one it
/// finds, a local change that wakes the watcher (cluster-test D: the caller on node1 woke up to
/// a poll interval after node3 finished the file).
final class SettledLookTests: XCTestCase {
    func testTheMarkerIsTouchedSoonAfterItAppears() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("settled-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let spool = try Spool(base: base, node: "t")
        let look = SettledLook(spool: spool, id: "r1", every: 0.05)
        defer { look.stop() }
        let marker = spool.layout.doneMarker("r1")
        XCTAssertTrue(FileManager.default.createFile(atPath: marker, contents: nil))
        let old = Date().addingTimeInterval(-100)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: marker)
        let deadline = Date().addingTimeInterval(2)
        var touched = false
        while Date() < deadline && !touched {
            usleep(10_000)
            let mtime = (try? FileManager.default.attributesOfItem(atPath: marker)[.modificationDate] as? Date) ?? old
            touched = mtime.timeIntervalSince(old) > 50
        }
        XCTAssertTrue(touched, "the done marker was touched, which wakes a waiter watching done/")
    }
}
