// StatusCommand - `speech status`: the spool's daemons, workers and requests, and the downloads
// running without the daemon, each with bytes, percentage, rate and ETA.
import ByteUnits
import CommandLineKit
import Daemon
import Foundation
import SharedFiles
import SpeechFetch

enum StatusCommand {
    static let spec = CommandSpec(
        name: "speech status",
        summary: """
        The spool of a cache base: daemons, busy workers, requests (bytes, percentage, rate, ETA, and
        the jobs of each file), and the downloads running without the daemon (staging locks under
        `.incomplete/`). While anything is in flight it looks twice, a second apart, for the rate.
        """,
        options: [CacheCommand.baseOption, .flag("json", "one JSON object (with --watch: one a second)"),
                  .flag("watch", "look again every second until Ctrl-C: redrawn on a terminal, a line a second when piped")])

    /// One transfer's bytes at two looks a second apart.
    struct Flow {
        let bytes: Int64
        let total: Int64
        let rate: Double?

        var percent: Double { total > 0 ? Double(bytes) / Double(total) * 100 : 100 }
        var eta: Double? { rate.flatMap { RateMeter.eta(remaining: total - bytes, bytesPerSecond: $0) } }

        var text: String {
            "\(ByteFormat.string(bytes)) / \(ByteFormat.string(total)) (\(String(format: "%.1f", percent)) %)"
                + (rate.map { ", \(ByteFormat.rate(Int64($0))), ETA \(eta.map(DurationText.compact) ?? "--")" } ?? "")
        }

        var json: [String: Any] {
            ["bytes": bytes, "totalBytes": total, "percent": (percent * 10).rounded() / 10,
             "bytesPerSecond": rate.map { Int64($0) as Any } ?? NSNull(), "etaSeconds": eta.map { Int64($0.rounded()) as Any } ?? NSNull()]
        }
    }

    static func run(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(spec, words)
        let base = parsed.value("cache-base").map { URL(fileURLWithPath: $0) } ?? HuggingFaceDownloader().defaultCacheBase
        if parsed.flag("watch") { StatusWatch.run(base: base, json: parsed.flag("json")) }
        let admin = CacheAdmin(cacheBase: base)
        var status: SpoolStatus
        do {
            status = try SpoolStatus.read(cacheBase: base)
        } catch {
            // Another user's daemon: said in one line, with the command that can look (as `speech env` says it).
            if let other = admin.otherUsersDaemon {
                speechProgram.fail("\(base.path) is served by a speech-fetchd running as \(other.user)\(other.pid.map { " (pid \($0))" } ?? ""), "
                                   + "whose spool \(Messages.accountName(geteuid())) may not read; run it as \(other.user): \(Messages.asUser(other.user))")
            }
            speechProgram.fail(Messages.describe(error))
        }
        var staged = admin.stagedTransfers()
        // The rate: a second look, one second later, when anything moves.
        var before: [String: RateMeter] = [:]
        func firstLook(_ bytes: Int64) -> RateMeter {
            var meter = RateMeter()
            _ = meter.add(bytes)
            return meter
        }
        for request in status.requests where request.state == "in flight" { before[request.id] = firstLook(request.completedBytes) }
        for file in staged { before[file.modelDir + "\n" + file.path] = firstLook(file.bytes) }
        if !before.isEmpty {
            usleep(1_000_000)
            if let again = try? SpoolStatus.read(cacheBase: base) { status = again }
            staged = admin.stagedTransfers()
        }
        func flow(_ id: String, _ bytes: Int64, _ total: Int64) -> Flow {
            guard var meter = before[id] else { return Flow(bytes: bytes, total: total, rate: nil) }
            return Flow(bytes: bytes, total: total, rate: meter.add(bytes))
        }
        let requests = status.requests.map { ($0, flow($0.id, $0.completedBytes, $0.totalBytes)) }
        let embedded = staged.map { ($0, flow($0.modelDir + "\n" + $0.path, $0.bytes, $0.size)) }
        if parsed.flag("json") {
            emitJSON(["spool": status.spool, "supervisors": status.supervisors, "busyWorkers": status.busyWorkers,
                      "corruptRecords": status.corruptRecords,
                      "requests": requests.map { request, flow -> [String: Any] in
                          ["id": request.id, "repo": request.repo, "commit": request.commit, "modelDir": request.modelDir,
                           "state": request.state,
                           "files": request.files.map { ["path": $0.path, "ready": $0.ready, "claimed": $0.claimed,
                                                         "partsWaiting": $0.partsWaiting] as [String: Any] }]
                              .merging(flow.json) { a, _ in a }
                      },
                      "withoutDaemon": embedded.map { file, flow -> [String: Any] in
                          ["repo": file.repo, "modelDir": file.modelDir, "path": file.path, "holder": file.holder]
                              .merging(flow.json) { a, _ in a }
                      }] as [String: Any])
            exit(0)
        }
        var out = "spool \(status.spool)\n"
        out += "supervisors: \(status.supervisors.isEmpty ? "none" : status.supervisors.joined(separator: ", "))\n"
        out += "busy workers: " + (status.busyWorkers.isEmpty ? "none" : status.busyWorkers.sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")) + "\n"
        out += "requests: \(status.requests.count)\n"
        if let newest = status.corruptRecords.last {
            out += "corrupt records: \(status.corruptRecords.count) in \(status.corruptDir) (unreadable, set aside; safe to delete), newest \(newest)\n"
        }
        for (request, flow) in requests {
            out += "  \(request.repo) @ \(request.commit.prefix(10)) → \(request.modelDir) [\(request.state)] \(flow.text)\n"
            for file in request.files {
                out += "    \(file.path): \(file.ready) ready, \(file.claimed) claimed, \(counted(file.partsWaiting, "part")) waiting\n"
            }
        }
        if !embedded.isEmpty {
            out += "without the daemon: \(embedded.count)\n"
            for (file, flow) in embedded {
                out += "  \(file.repo) \(file.path) → \(file.modelDir) [staging lock held by \(file.holder)] \(flow.text)\n"
            }
        }
        emit(out)
        exit(0)
    }
}
