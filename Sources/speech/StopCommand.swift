// StopCommand - `speech stop`: stop the speech-fetchd serving a cache base on this node (one that
// `speech download --detach` started, or any other not run by systemd), and say what happened.
import CommandLineKit
import Daemon
import Foundation
import SpeechFetch

enum StopCommand {
    static let spec = CommandSpec(
        name: "speech stop",
        summary: """
        Stop this node's speech-fetchd serving the cache base: SIGTERM to the supervisor its spool record
        names, then wait while it drains (its workers give their ranges back; everything staged stays,
        and the next daemon or download resumes it). A daemon that a systemd unit runs is left to
        systemd: the command to run is printed instead.
        """,
        options: [CacheCommand.baseOption,
                  .value("timeout", "SECONDS", "how long to wait for the drain (default 30, as the unit's TimeoutStopSec)")],
        epilogue: """
        exit codes: 0 stopped, or none was running; 1 still draining after the wait, run by systemd, or
        another account's; 64 bad usage.
        """)

    static func run(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(spec, words)
        var timeout = 30.0
        if let raw = parsed.value("timeout") {
            guard let seconds = Double(raw), seconds >= 0, seconds.isFinite else {
                speechProgram.usageError("speech stop: --timeout takes seconds, like 30; not '\(raw)'", help: spec.name)
            }
            timeout = seconds
        }
        let baseArgument = parsed.value("cache-base").map { " --cache-base \(shellQuoted($0))" } ?? ""
        let base = parsed.value("cache-base").map { URL(fileURLWithPath: $0) } ?? HuggingFaceDownloader().defaultCacheBase
        switch DaemonStop.stop(cacheBase: base, timeout: timeout) {
        case .notRunning(let spool, let node):
            emit("no speech-fetchd of this node (\(node)) serves \(spool); nothing to stop\n")
            exit(0)
        case .stopped(let pid, let seconds):
            emit("stopped speech-fetchd (pid \(pid)) serving \(base.path) after \(String(format: "%.1f", seconds)) s; what it staged is kept\n")
            exit(0)
        case .stillDraining(let pid, let seconds):
            speechProgram.fail("speech-fetchd (pid \(pid)) got SIGTERM and is still draining after \(String(format: "%.0f", seconds)) s; "
                               + "wait longer (`speech stop\(baseArgument) --timeout 120`) or end it now with `kill -KILL \(pid)` (staged bytes are kept either way)")
        case .systemdUnit(let pid, let unit, let userManager):
            speechProgram.fail("speech-fetchd (pid \(pid)) is run by the systemd unit \(unit); stop it with `\(userManager ? "systemctl --user" : "sudo systemctl") stop \(unit)`, "
                               + "so that systemd knows (a SIGTERM from here would leave the unit's state wrong)")
        case .notPermitted(let pid, let user):
            speechProgram.fail("speech-fetchd (pid \(pid)) runs as \(user), whom this account may not signal; "
                               + "stop it as that account: `\(Messages.runAs(user)) speech stop\(baseArgument)`")
        }
    }
}
