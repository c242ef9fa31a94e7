// StatusWatch - `speech status --watch`: the status again every second until Ctrl-C (exit 0).
// On a terminal the screen is redrawn in place; piped, each second is one line (one JSON
// object with --json), so a log or `grep` follows it. The rate is the bytes between two looks.
import Daemon
import Foundation
import SpeechFetch

enum StatusWatch {
    /// One look's transfers, keyed as the rate needs them: requests by id, files by directory and path.
    private struct Look {
        var status: SpoolStatus
        var staged: [StagedTransfer]
        var at: Date
    }

    static func run(base: URL, json: Bool) -> Never {
        let interrupt = StopSignal()
        interrupt.install()
        let admin = CacheAdmin(cacheBase: base)
        let terminal = !json && isatty(STDOUT_FILENO) != 0
        var previous: [String: Int64] = [:]
        var previousAt: Date?
        while !interrupt.isRaised {
            let look: Look
            do {
                look = Look(status: try SpoolStatus.read(cacheBase: base), staged: admin.stagedTransfers(), at: Date())
            } catch {
                speechProgram.fail(Messages.describe(error))
            }
            let seconds = previousAt.map { max(0.001, look.at.timeIntervalSince($0)) }
            func flow(_ key: String, _ bytes: Int64, _ total: Int64) -> StatusCommand.Flow {
                let rate = seconds.flatMap { s in previous[key].map { Double(max(0, bytes - $0)) / s } }
                return StatusCommand.Flow(bytes: bytes, total: total, rate: rate)
            }
            let requests = look.status.requests.map { ($0, flow($0.id, $0.completedBytes, $0.totalBytes)) }
            let staged = look.staged.map { ($0, flow($0.modelDir + "\n" + $0.path, $0.bytes, $0.size)) }
            previous = Dictionary(look.status.requests.map { ($0.id, $0.completedBytes) } + look.staged.map { ($0.modelDir + "\n" + $0.path, $0.bytes) },
                                  uniquingKeysWith: { a, _ in a })
            previousAt = look.at
            let clock = timeOfDay(look.at)
            if json {
                emitJSON(["time": clock, "supervisors": look.status.supervisors, "busyWorkers": look.status.busyWorkers,
                          "requests": requests.map { r, f in ["id": r.id, "repo": r.repo, "state": r.state].merging(f.json) { a, _ in a } },
                          "withoutDaemon": staged.map { s, f in ["repo": s.repo, "path": s.path, "holder": s.holder].merging(f.json) { a, _ in a } }]
                         as [String: Any])
            } else if terminal {
                var screen = "\u{1b}[H\u{1b}[J" + "speech status --watch  \(clock)  (Ctrl-C stops)\n"
                screen += "spool \(look.status.spool)\n"
                screen += "supervisors: \(look.status.supervisors.isEmpty ? "none" : look.status.supervisors.joined(separator: ", "))\n"
                screen += "busy workers: " + (look.status.busyWorkers.isEmpty ? "none" : look.status.busyWorkers.sorted { $0.key < $1.key }
                    .map { "\($0.key) \($0.value)" }.joined(separator: ", ")) + "\n"
                screen += "requests: \(requests.count)\n"
                for (r, f) in requests { screen += "  \(r.repo) @ \(r.commit.prefix(10)) [\(r.state)] \(f.text)\n" }
                if !staged.isEmpty { screen += "without the daemon: \(staged.count)\n" }
                for (s, f) in staged { screen += "  \(s.repo) \(s.path) [\(s.holder)] \(f.text)\n" }
                emit(screen)
            } else {
                emit(line(clock, look.status, requests: requests.filter { $0.0.state == "in flight" }.map(\.1), staged: staged.map(\.1)))
            }
            // A second in small steps, so Ctrl-C ends the watch at once.
            let until = look.at.addingTimeInterval(1)
            while !interrupt.isRaised && Date() < until { usleep(50_000) }
        }
        exit(0)
    }

    /// Piped: one line for the whole base, its transfers in flight summed.
    private static func line(_ clock: String, _ status: SpoolStatus, requests: [StatusCommand.Flow], staged: [StatusCommand.Flow]) -> String {
        let workers = status.busyWorkers.values.reduce(0, +)
        var text = "\(clock) supervisors: \(status.supervisors.isEmpty ? "none" : status.supervisors.joined(separator: ", ")), busy workers: \(workers)"
        let flows = requests + staged
        guard !flows.isEmpty else { return text + ", nothing in flight\n" }
        let rates = flows.compactMap(\.rate)
        let sum = StatusCommand.Flow(bytes: flows.reduce(0) { $0 + $1.bytes }, total: flows.reduce(0) { $0 + $1.total },
                                     rate: rates.isEmpty ? nil : rates.reduce(0, +))
        text += ", \(requests.count) \(requests.count == 1 ? "request" : "requests") in flight, \(staged.count) without the daemon: \(sum.text)"
        return text + "\n"
    }

    private static func timeOfDay(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&t, &parts)
        return String(format: "%02d:%02d:%02d", parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}
