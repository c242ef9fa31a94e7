// DaemonFixture - real speech-fetchd and speech processes against the in-process test Hub:
// start, find workers, SIGKILL, and clean up every process a test started, even on failure.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
import XCTest

class DaemonTestCase: HubTestCase {
    /// Every child process a test started (daemons, clients, waiters).
    private var children: [Process] = []
    /// Processes that are not our children (a detached daemon) but that a test made start.
    private var strangers: [pid_t] = []
    private let bookLock = NSLock()
    private var logCounter = 0

    override func tearDownWithError() throws {
        // Collect whole trees first (a daemon's workers), then kill everything, then reap.
        let own = bookLock.withLock { children }
        let others = bookLock.withLock { strangers }
        var doomed: [pid_t] = []
        for p in own where p.isRunning { doomed += [p.processIdentifier] + descendants(of: p.processIdentifier) }
        for pid in others where isAlive(pid) { doomed += [pid] + descendants(of: pid) }
        // Orphans (workers of a supervisor a test killed) still name this test's unique cache base.
        if temp != nil { doomed += processes(mentioning: temp.path) }
        for pid in doomed { kill(pid, SIGKILL) }
        for p in own { p.waitUntilExit() }
        for pid in doomed { _ = waitUntil(timeout: 5) { !self.isAlive(pid) } }
        bookLock.withLock {
            children = []
            strangers = []
        }
        try super.tearDownWithError()  // removes the spool's folder on /dev/shm, now that its processes are gone
    }

    // MARK: Binaries

    var fetchdBinary: URL { speechBinary.deletingLastPathComponent().appendingPathComponent("speech-fetchd") }

    // MARK: Paths

    var spool: URL { cacheBase.appendingPathComponent("spool") }
    func spoolPath(_ sub: String) -> String { spool.appendingPathComponent(sub).path }
    func names(_ sub: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: spoolPath(sub))) ?? []).sorted()
    }

    /// A fresh log file under the test's temp folder.
    func logFile(_ hint: String) -> URL {
        let n = bookLock.withLock { logCounter += 1; return logCounter }
        let url = temp.appendingPathComponent("logs/\(hint)-\(n).log")
        try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        return url
    }

    func contents(_ url: URL) -> String { (try? String(contentsOf: url, encoding: .utf8)) ?? "" }

    // MARK: Processes

    /// Starts a child process whose stdout and stderr go to files; it is killed in tearDown.
    @discardableResult
    func launch(_ executable: URL, _ arguments: [String], environment: [String: String], hint: String,
                standardInput: FileHandle? = nil,
                onExit: (@Sendable (Process) -> Void)? = nil) throws -> (process: Process, stdout: URL, stderr: URL) {
        let out = logFile(hint + "-out")
        let err = logFile(hint + "-err")
        let p = Process()
        p.executableURL = executable
        p.arguments = arguments
        p.environment = environment
        p.standardInput = standardInput ?? FileHandle.nullDevice
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = try FileHandle(forWritingTo: err)
        if let onExit { p.terminationHandler = onExit }
        bookLock.withLock { children.append(p) }
        try p.run()
        return (p, out, err)
    }

    /// `speech <args…>` as a child process.
    @discardableResult
    func speech(_ arguments: [String], extra: [String: String] = [:], hint: String = "speech", standardInput: FileHandle? = nil,
                onExit: (@Sendable (Process) -> Void)? = nil) throws -> (process: Process, stdout: URL, stderr: URL) {
        try launch(speechBinary, arguments, environment: environment(extra: extra), hint: hint, standardInput: standardInput, onExit: onExit)
    }

    /// Starts `speech-fetchd --cache-base <cacheBase> --workers N --slots K` and waits until it
    /// serves the base (its pid in `spool/supervisors/<node>`) and its workers are up. One slot
    /// per worker by default, so killing a worker loses exactly its one range.
    @discardableResult
    func startDaemon(workers: Int = 3, slots: Int = 1, extra: [String: String] = [:], environment env: [String: String]? = nil,
                     arguments: [String] = [],
                     file: StaticString = #filePath, line: UInt = #line) throws -> (process: Process, log: URL) {
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "\(workers)", "--slots", "\(slots)"] + arguments,
                                     environment: env ?? environment(extra: extra), hint: "fetchd")
        let serving = waitUntil(timeout: 15) {
            self.supervisorPid() == p.processIdentifier && self.descendants(of: p.processIdentifier).count >= workers
        }
        XCTAssertTrue(serving, "speech-fetchd serves the base with \(workers) workers; log:\n\(contents(err))",
                      file: file, line: line)
        return (p, err)
    }

    /// Waits for one of `workers` to claim a job; returns its pid and the job name.
    func firstClaim(by workers: Set<pid_t>, timeout: Double = 15) -> (pid: pid_t, job: String)? {
        var found: (pid_t, String)?
        waitUntil(timeout: timeout, interval: 0.005) {
            for entry in self.names("jobs/claimed") {
                let pieces = entry.split(separator: "@")
                if pieces.count == 3, let pid = pid_t(pieces[2]), workers.contains(pid) {
                    found = (pid, String(pieces[0]))
                    return true
                }
            }
            return false
        }
        return found
    }

    /// Waits (20 s at most) until `worker`'s progress record of `job` in the spool's tmp/ holds
    /// `bytes`; returns the record's name and the bytes it held when last looked at ("" and 0
    /// when there was none).
    func waitForProgressRecord(of job: String, by worker: pid_t, holding bytes: Int) -> (name: String, held: Int) {
        var found = (name: "", held: 0)
        waitUntil(timeout: 20) {
            for name in self.names("tmp") where name.hasPrefix("part-\(job)") && name.contains("@\(worker)@") {
                let attributes = try? FileManager.default.attributesOfItem(atPath: self.spoolPath("tmp/\(name)"))
                found = (name, (attributes?[.size] as? Int) ?? 0)
            }
            return found.held >= bytes
        }
        return found
    }

    /// The pid the supervisor of this node wrote into `spool/supervisors/<node>`.
    func supervisorPid() -> pid_t? {
        for name in names("supervisors") {
            if let text = try? String(contentsOfFile: spoolPath("supervisors/\(name)"), encoding: .utf8),
               let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) { return pid }
        }
        return nil
    }

    /// Remembers a child process started without `launch` (its output on a pipe), so tearDown
    /// stops it (and its children).
    func track(_ process: Process) { bookLock.withLock { children.append(process) } }

    /// Remembers a process that is not our child, so tearDown stops it (and its children).
    func adoptStranger(_ pid: pid_t) { bookLock.withLock { strangers.append(pid) } }

    /// Polls `condition` every `interval` seconds until it holds (true) or `timeout` passes (false).
    @discardableResult
    func waitUntil(timeout: Double, interval: Double = 0.01, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if condition() { return true }
            if Date() >= deadline { return false }
            usleep(UInt32(interval * 1_000_000))
        }
    }

    /// Waits for a child to exit; false (and the child is killed) when it did not within `timeout`.
    @discardableResult
    func waitForExit(_ p: Process, timeout: Double) -> Bool {
        if waitUntil(timeout: timeout, { !p.isRunning }) {
            p.waitUntilExit()
            return true
        }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        return false
    }

    // MARK: /proc

    /// `(state, ppid, utime + stime in seconds)` from /proc/<pid>/stat, nil when the process is gone.
    func procStat(_ pid: pid_t) -> (state: Character, ppid: pid_t, cpu: Double)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] = state (3rd field), [1] = ppid, [11] = utime, [12] = stime
        guard fields.count > 12, let ppid = pid_t(fields[1]), let utime = Double(fields[11]),
              let stime = Double(fields[12]) else { return nil }
        let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (fields[0].first ?? "?", ppid, (utime + stime) / hz)
    }

    /// True while the process exists and is not a zombie.
    func isAlive(_ pid: pid_t) -> Bool {
        guard let st = procStat(pid) else { return false }
        return st.state != "Z" && st.state != "X"
    }

    /// Every live descendant of `pid` (children, grandchildren…).
    func descendants(of pid: pid_t) -> [pid_t] {
        var parentOf: [pid_t: pid_t] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = pid_t(entry), let st = procStat(child), st.state != "Z" else { continue }
            parentOf[child] = st.ppid
        }
        var result: [pid_t] = []
        var frontier = [pid]
        while let next = frontier.popLast() {
            let kids = parentOf.filter { $0.value == next }.map(\.key)
            result += kids
            frontier += kids
        }
        return result
    }

    /// Live processes whose command line names `text` (this test's unique temp path).
    func processes(mentioning text: String) -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { pid_t($0) }
            .filter { $0 != getpid() && isAlive($0) && commandLine($0).contains(text) }
    }

    /// The command line of a process, arguments joined by spaces.
    func commandLine(_ pid: pid_t) -> String {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return "" }
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\0", with: " ")
    }

    // MARK: Staging

    func sidecar(_ repo: String, _ path: String) -> Sidecar? {
        Sidecar.look(path, in: ModelDirectory(modelDir(repo))).value ?? nil
    }

    func finalExists(_ repo: String, _ path: String) -> Bool {
        FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(path).path)
    }

    /// Median and maximum of some figures.
    func medianAndMax(_ values: [Double]) -> (median: Double, max: Double) {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return (0, 0) }
        let mid = sorted.count / 2
        let median = sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
        return (median, sorted.last!)
    }
}

/// Exit times of child processes, written from their termination handlers.
final class ExitClock: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [pid_t: Date] = [:]
    func mark(_ p: Process) { lock.withLock { times[p.processIdentifier] = Date() } }
    /// When `pid` exited; waits up to a second for its termination handler, which Foundation
    /// may run a moment after the process is reaped.
    func time(of pid: pid_t) -> Date? {
        let deadline = Date().addingTimeInterval(1)
        while Date() < deadline {
            if let t = lock.withLock({ times[pid] }) { return t }
            usleep(5_000)
        }
        return nil
    }
}
