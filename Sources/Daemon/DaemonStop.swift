// DaemonStop - `speech stop`: ends the speech-fetchd that serves a cache base on this node the
// way `systemctl stop` would: SIGTERM to the supervisor its record names, then a wait while it
// drains (its workers give their ranges back; every staged byte stays for the next start).
//
// A supervisor that a systemd unit runs is left to systemd: stopping it behind systemd's back
// leaves the unit's state wrong (and `Restart=` may start it again), so the caller is told the
// `systemctl stop` to run instead.
import Foundation
import SharedFiles
import Spool
import Transfer

public enum DaemonStop {
    /// What `stop` found and did.
    public enum Outcome: Sendable, Equatable {
        /// No live speech-fetchd of this node serves the base (none ever did, or its record is stale).
        case notRunning(spool: String, node: String)
        /// It drained and exited within the wait.
        case stopped(pid: Int32, seconds: Double)
        /// SIGTERM was sent, and it was still draining when the wait ended.
        case stillDraining(pid: Int32, seconds: Double)
        /// A systemd unit runs it: stop that unit instead (`systemctl [--user] stop <unit>`).
        case systemdUnit(pid: Int32, unit: String, userManager: Bool)
        /// It runs as another account, which this process may not signal.
        case notPermitted(pid: Int32, user: String)
    }

    /// Stops this node's speech-fetchd serving `cacheBase` and waits up to `timeout` seconds for
    /// it to exit. A record whose pid names another process now (the daemon was killed and the
    /// pid reused) is not signalled: only a process named speech-fetchd is.
    public static func stop(cacheBase: URL, timeout: Double,
                            environment: [String: String] = ProcessInfo.processInfo.environment) -> Outcome {
        let settings = DownloadSettings.fromEnvironment(environment)
        let root = SpoolLayout(base: cacheBase.standardizedFileURL.path).root
        guard let spool = Spool.existing(base: cacheBase, node: settings.node, lease: settings.lease),
              let pid = spool.supervisorPID(of: settings.node), LeaseJudge.processRunning(pid),
              processName(pid) == "speech-fetchd" else {
            return .notRunning(spool: root, node: settings.node)
        }
        if let (unit, user) = (try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)).flatMap(systemdUnit(cgroup:)),
           isMainProcess(pid, of: unit, userManager: user) {
            return .systemdUnit(pid: pid, unit: unit, userManager: user)
        }
        let started = LeaseJudge.startTime(of: pid)
        guard kill(pid, SIGTERM) == 0 else {
            return errno == EPERM ? .notPermitted(pid: pid, user: owner(of: pid)) : .notRunning(spool: root, node: settings.node)
        }
        let begin = MonotonicClock.seconds()
        while LeaseJudge.processRunning(pid) && LeaseJudge.startTime(of: pid) == started {
            let waited = MonotonicClock.seconds() - begin
            if waited >= timeout { return .stillDraining(pid: pid, seconds: waited) }
            usleep(20_000)
        }
        return .stopped(pid: pid, seconds: MonotonicClock.seconds() - begin)
    }

    /// The systemd service unit a process runs in, from its `/proc/<pid>/cgroup` (cgroup v2's
    /// `0::/system.slice/speech-fetchd.service`, or v1's `name=systemd` line), and whether a
    /// user's manager (`user@<uid>.service`) runs it; nil for a process of a login session
    /// (`session-3.scope`), a terminal's scope, or no systemd at all.
    public static func systemdUnit(cgroup: String) -> (unit: String, userManager: Bool)? {
        for line in cgroup.split(separator: "\n") where line.hasPrefix("0::") || line.contains(":name=systemd:") {
            guard let path = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last else { continue }
            let components = path.split(separator: "/")
            // The innermost service: a unit's own sub-cgroups (`.../x.service/payload`) still belong to it.
            guard let unit = components.last(where: { $0.hasSuffix(".service") }), !unit.hasPrefix("user@") else { continue }
            return (String(unit), components.contains { $0.hasPrefix("user@") && $0.hasSuffix(".service") })
        }
        return nil
    }

    /// True when `pid` is the main process of `unit` as systemd knows it (`systemctl show -p
    /// MainPID`), not a daemon that `--detach` started from a shell inside another service (a CI
    /// runner's job). Without systemctl to ask, a unit named after speech-fetchd counts.
    static func isMainProcess(_ pid: Int32, of unit: String, userManager: Bool) -> Bool {
        let systemctl = ["/usr/bin/systemctl", "/bin/systemctl"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let systemctl else { return unit.hasPrefix("speech-fetchd") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: systemctl)
        process.arguments = (userManager ? ["--user"] : []) + ["show", "--property=MainPID", "--value", unit]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return unit.hasPrefix("speech-fetchd") }
        let answer = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return Int32(answer.trimmingCharacters(in: .whitespacesAndNewlines)) == pid
    }

    /// The name the kernel shows for `pid` (`/proc/<pid>/comm`; speech-fetchd names itself).
    static func processName(_ pid: Int32) -> String? {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The account `pid` runs as, by name where it has one.
    static func owner(of pid: Int32) -> String {
        var info = stat()
        guard stat("/proc/\(pid)", &info) == 0 else { return "another account" }
        guard let entry = getpwuid(info.st_uid), let name = entry.pointee.pw_name else { return "uid \(info.st_uid)" }
        return String(cString: name)
    }
}
