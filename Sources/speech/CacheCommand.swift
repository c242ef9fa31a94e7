// CacheCommand - `speech cache …`: parse the subcommand, run CacheAdmin, print its report.
import ByteUnits
import CommandLineKit
import ModelCache
import Foundation
import SpeechFetch

enum CacheCommand {
    /// Every `speech cache` command, in the order help lists them: `speech --help`, this
    /// command's usage and its errors say them from here (the man page and docs/cli.md from
    /// those helps).
    static let commandNames = ["ls", "verify", "rm", "clean", "prune", "pin", "unpin", "import-hf"]

    static let baseOption = Option.value("cache-base", "DIR", "the cache base (default: $QWEN3_CACHE_DIR or ~/.cache/qwen3-speech)")

    static let spec = CommandSpec(
        name: "speech cache", operands: "<\(commandNames.joined(separator: " | "))> [...]",
        summary: """
        Manage the cache: list, re-hash, remove, clean up, adopt a huggingface_hub cache.

        commands:
          ls                          every model: size on disk, complete / incomplete / in flight, last used
          verify [org/name] [--fix]   re-hash LFS files against their recorded sha256 (exit 1 when any is corrupt)
          rm <org/name>               delete a model (refused while it is in flight)
          clean [--older-than HOURS]  delete abandoned staging and orphaned spool entries older than HOURS (24)
          prune --max-size SIZE       evict least recently used models until the cache fits in SIZE (20G, 500M);
                                      --hf-cache [DIR] counts a huggingface_hub cache's revisions too
          pin <org/name>              never evict this model (unpin <org/name> undoes it)
          import-hf [--hf-home DIR]   adopt models from a huggingface_hub cache (DIR/hub, else HF_HUB_CACHE, else
                                      ${HF_HOME:-~/.cache/huggingface}/hub) by hard link, after checking them
        `speech cache <command> --help` describes each.
        """,
        options: [baseOption], minOperands: 1, maxOperands: nil)

    static let subcommands: [String: CommandSpec] = [
        "ls": CommandSpec(name: "speech cache ls",
                          summary: "Every model of the cache base: size on disk, complete / incomplete / in flight, last used.",
                          options: [baseOption, .flag("json", "one JSON object per model, one per line")]),
        "verify": CommandSpec(name: "speech cache verify", operands: "[org/name]",
                              summary: """
                              Re-hash LFS files against their recorded sha256 (exit 1 when any is corrupt). --fix deletes
                              corrupt files and re-queues them with speech-fetchd, if one serves the base.
                              """,
                              options: [baseOption, .flag("fix", "delete corrupt files and fetch them again")], maxOperands: 1),
        "rm": CommandSpec(name: "speech cache rm", operands: "<org/name>",
                          summary: "Delete a model (refused while it is in flight).", options: [baseOption],
                          minOperands: 1, maxOperands: 1),
        "clean": CommandSpec(name: "speech cache clean",
                             summary: "Delete abandoned staging files and orphaned spool entries older than HOURS (default 24).",
                             options: [baseOption, .value("older-than", "HOURS", "age in hours (default 24)")]),
        "prune": CommandSpec(name: "speech cache prune",
                             summary: """
                             Evict whole models, least recently used first, until the models fit in SIZE. Never evicts a
                             model in flight on any node, a pinned one, or one used within the grace period. A use is
                             recorded at most once an hour (one write an hour on a shared filesystem, not one per load),
                             so a model whose use was recorded within the last hour is kept even with --grace 0. An
                             evicted model is deleted at once on a local disk; on a network or FUSE filesystem it waits in
                             models/.evicted/ for the grace period (another node may still be reading it), and a later
                             pass deletes it. With --hf-cache, blobs no revision points to that are older than the grace
                             period are removed first.
                             """,
                             options: [baseOption,
                                       .value("max-size", "SIZE", "the cap: 20G, 500M, 64K (1024-based) or bytes"),
                                       .value("grace", "HOURS", "keep models used within HOURS (plus the hour a use record may lag), and evicted folders on a shared filesystem that long (default 1)"),
                                       .optionalValue("hf-cache", "DIR", "cap this huggingface_hub cache's revisions too (DIR, else HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)"),
                                       .flag("dry-run", "print what would be evicted; change nothing")]),
        "pin": CommandSpec(name: "speech cache pin", operands: "<org/name>",
                           summary: "Never evict this model (prune, speech-fetchd --max-cache-size); it may be pinned before it is downloaded.",
                           options: [baseOption], minOperands: 1, maxOperands: 1),
        "unpin": CommandSpec(name: "speech cache unpin", operands: "<org/name>",
                             summary: "Let the size cap evict this model again.", options: [baseOption], minOperands: 1, maxOperands: 1),
        "import-hf": CommandSpec(name: "speech cache import-hf",
                                 summary: """
                                 Adopt models from a huggingface_hub cache (DIR/hub, else HF_HUB_CACHE, else
                                 ${HF_HOME:-~/.cache/huggingface}/hub) by hard link
                                 (copy across filesystems), after checking size and digest; exit 1 when a file is refused.
                                 """,
                                 options: [baseOption, .value("hf-home", "DIR", "the huggingface_hub home (default $HF_HOME)")]),
    ]

    /// Runs `speech cache <words>` and exits: 0 done, 1 failed (or corrupt files found, or
    /// refused), 64 bad usage.
    static func run(_ words: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Never {
        // The subcommand is the first word that is not an option (or an option's value).
        var index = 0
        while index < words.count, words[index].hasPrefix("-") {
            index += words[index] == "--cache-base" ? 2 : 1
        }
        guard index < words.count else {
            _ = speechProgram.parse(spec, words)  // help, version, or a usage error
            speechProgram.usageError("speech cache: missing command (\(commandNames.joined(separator: ", ")))", help: spec.name)
        }
        let command = words[index]
        if command == "help" { emit(spec.help); exit(0) }
        guard let sub = subcommands[command] else {
            speechProgram.usageError("speech cache: unknown command '\(command)' (\(commandNames.joined(separator: ", ")))", help: spec.name)
        }
        var rest = words
        rest.remove(at: index)
        let parsed = speechProgram.parse(sub, rest)
        let base = parsed.value("cache-base")
        let admin = CacheAdmin(cacheBase: base.map { URL(fileURLWithPath: $0) }, environment: environment,
                               knownSelections: ModelCatalog.fileSelections)
        let baseArgument = base.map { " --cache-base \(shellQuoted($0))" } ?? ""
        do {
            switch command {
            case "ls":
                let models = admin.list()
                let hf = admin.listHubCache()
                if parsed.flag("json") {
                    for model in models { emitJSON(json(model)) }
                    for model in hf?.models ?? [] {
                        var object = json(model)
                        object["huggingFaceCache"] = hf?.hub.path
                        emitJSON(object)
                    }
                } else {
                    var out = renderList(models, base: admin.base)
                    if let hf, !hf.models.isEmpty {
                        out += "\nhuggingface_hub cache \(hf.hub.path) (HF_HUB_CACHE, HF_HOME):\n" + renderList(hf.models, base: hf.hub)
                    }
                    emit(out)
                }
                exit(0)
            case "verify":
                let fix = parsed.flag("fix")
                let report = try admin.verify(repo: parsed.operands.first, fix: fix)
                emit(renderVerify(report, fix: fix, baseArgument: baseArgument))
                exit(report.isClean ? 0 : 1)
            case "rm":
                let removed = try admin.remove(repo: parsed.operands[0])
                var out = "removed \(removed.repo) (\(removed.directory.path)), freed \(ByteFormat.string(removed.bytesFreed))"
                if removed.requestsDropped > 0 { out += "; dropped \(removed.requestsDropped) settled spool requests for it" }
                emit(out + "\n")
                exit(0)
            case "clean":
                let hours = Self.hours(parsed.value("older-than"), option: "older-than", example: "48", default: 24, spec: sub)
                emit(renderClean(admin.clean(olderThan: hours * 3600), hours: hours))
                exit(0)
            case "prune":
                guard let raw = parsed.value("max-size") else {
                    speechProgram.usageError("speech cache prune: --max-size SIZE is required, e.g. --max-size 20G", help: sub.name)
                }
                guard let size = ByteRate.parse(raw) else {
                    speechProgram.usageError("speech cache prune: --max-size needs a size: a number with K, M or G (1024-based), like 500M or 20G, or plain bytes; not '\(raw)'", help: sub.name)
                }
                let grace = Self.hours(parsed.value("grace"), option: "grace", example: "2", default: 1, spec: sub)
                let hub = parsed.value("hf-cache").map { $0.isEmpty ? HubCache.defaultDirectory(environment) : URL(fileURLWithPath: $0) }
                emit(renderPrune(admin.prune(PruneOptions(maxSize: size, grace: grace * 3600, dryRun: parsed.flag("dry-run"), hubCache: hub))))
                exit(0)
            case "pin", "unpin":
                let repo = parsed.operands[0]
                let changed = command == "pin" ? try admin.pin(repo: repo) : try admin.unpin(repo: repo)
                emit("\(repo) \(changed ? "is now" : "was already") \(command == "pin" ? "pinned" : "unpinned") (\(admin.pinsDirectory))\n")
                exit(0)
            default:  // import-hf
                let report = try admin.importHF(hfHome: parsed.value("hf-home").map { URL(fileURLWithPath: $0) })
                emit(renderImport(report, base: admin.base))
                exit(report.filesRefused == 0 ? 0 : 1)
            }
        } catch {
            speechProgram.fail("cache \(command): \(Messages.describe(error, baseArgument: baseArgument))")
        }
    }

    /// `--NAME HOURS`: a number of hours (decimals allowed), `fallback` when absent.
    static func hours(_ raw: String?, option: String, example: String, default fallback: Double, spec: CommandSpec) -> Double {
        guard let raw else { return fallback }
        guard let value = Double(raw.trimmingCharacters(in: .whitespaces)), value >= 0, value.isFinite else {
            speechProgram.usageError("\(spec.name): --\(option) takes a number of hours, e.g. --\(option) \(example)", help: spec.name)
        }
        return value
    }

    static func json(_ model: CachedModel) -> [String: Any] {
        var object: [String: Any] = ["repo": model.repo, "directory": model.directory.path, "state": model.state.rawValue,
                                     "sizeOnDisk": model.sizeOnDisk, "sharedBytes": model.sharedBytes,
                                     "stagedBytes": model.stagedBytes, "files": model.fileCount, "missing": model.missing,
                                     "staged": model.staged, "inFlight": model.inFlight]
        if let commit = model.commit { object["commit"] = commit }
        if let used = model.lastUsed { object["lastUsed"] = ISO8601DateFormatter().string(from: used) }
        if let kind = model.lastUsedKind { object["lastUsedKind"] = kind.rawValue }
        return object
    }

    // MARK: Rendering

    static func renderList(_ models: [CachedModel], base: URL) -> String {
        guard !models.isEmpty else { return "no models in \(base.path)/models\n" }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        var rows = [["MODEL", "STATE", "SIZE", "LAST USED"]]
        var notes: [Int: [String]] = [:]
        for model in models {
            let used = model.lastUsed.map { "\(formatter.string(from: $0)) (\(model.lastUsedKind?.rawValue ?? ""))" } ?? "-"
            rows.append([model.repo, model.state.rawValue, ByteFormat.string(model.sizeOnDisk), used])
            var lines: [String] = []
            if model.sharedBytes > 0 {
                lines.append("\(ByteFormat.string(model.sharedBytes)) shared by hard links (e.g. with a huggingface_hub cache)")
            }
            lines += model.inFlight
            if !model.missing.isEmpty {
                let shown = model.missing.prefix(5).joined(separator: ", ")
                lines.append("\(model.missing.count) missing: \(shown)\(model.missing.count > 5 ? ", …" : "")")
            }
            if !model.staged.isEmpty {
                lines.append("\(model.staged.count) staged in .incomplete/ (\(ByteFormat.string(model.stagedBytes))): "
                             + model.staged.prefix(5).joined(separator: ", ") + (model.staged.count > 5 ? ", …" : ""))
            }
            notes[rows.count - 1] = lines
        }
        let widths = (0..<4).map { c in rows.map { $0[c].count }.max() ?? 0 }
        var out = ""
        for (index, row) in rows.enumerated() {
            out += row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
            for line in notes[index] ?? [] { out += "    \(line)\n" }
        }
        let total = models.reduce(Int64(0)) { $0 + $1.sizeOnDisk }
        out += "\(count(models.count, "model")), \(ByteFormat.string(total)) on disk in \(base.path)\n"
        return out
    }

    static func renderVerify(_ report: VerifyReport, fix: Bool, baseArgument: String) -> String {
        var out = ""
        for c in report.corrupt {
            out += "CORRUPT \(c.repo) \(c.path)\n    expected \(c.expected)\n    actual   \(c.actual)\n"
            if c.deleted { out += "    deleted\n" }
        }
        for line in report.skipped { out += "skipped: \(line)\n" }
        out += "\(count(report.repos.count, "model")), \(count(report.checkedFiles, "file")) checked, \(report.hashedFiles) re-hashed "
            + "(\(ByteFormat.string(report.hashedBytes))), \(report.corrupt.count) corrupt"
            + (report.missing > 0 ? ", \(report.missing) listed but not on disk" : "") + "\n"
        for id in report.requeued { out += "handed to speech-fetchd as spool request \(id); `speech wait <org/name>\(baseArgument)` blocks until it is done\n" }
        for command in report.advice { out += "no speech-fetchd serves this cache; fetch them again with:\n    \(command)\n" }
        if !report.corrupt.isEmpty && !fix { out += "run `speech cache verify\(report.repos.count == 1 ? " " + report.repos[0] : "") --fix\(baseArgument)` to delete the corrupt files and fetch them again\n" }
        return out
    }

    static func renderClean(_ report: CleanReport, hours: Double) -> String {
        var out = ""
        for item in report.removed { out += "removed \(item.path) (\(item.reason), \(ByteFormat.string(item.bytes)))\n" }
        for line in report.kept { out += "kept \(line)\n" }
        let age = hours == hours.rounded() ? "\(Int(hours)) h" : "\(hours) h"
        out += report.removed.isEmpty ? "nothing older than \(age) to clean\n"
            : "\(count(report.removed.count, "item")) removed, \(ByteFormat.string(report.bytesFreed)) freed\n"
        return out
    }

    static func renderPrune(_ report: PruneReport) -> String {
        var out = ""
        let verb = report.dryRun ? "would evict" : "evicted"
        for model in report.evicted {
            let used = model.lastUse.map { " (last used \(ISO8601DateFormatter().string(from: $0)))" } ?? ""
            out += "\(verb) \(PruneReport.name(model.repo, model.revision)), \(ByteFormat.string(model.bytes))\(used)\n"
        }
        for model in report.kept { out += "kept \(PruneReport.name(model.repo, model.revision)), \(ByteFormat.string(model.bytes)): \(model.reason)\n" }
        for item in report.orphans { out += "\(report.dryRun ? "would remove" : "removed") orphan blob \(item.path) (\(item.reason), \(ByteFormat.string(item.bytes)))\n" }
        for item in report.purged { out += "\(report.dryRun ? "would delete" : "deleted") \(item.path) (\(item.reason), \(ByteFormat.string(item.bytes)))\n" }
        out += "models: \(ByteFormat.string(report.sizeBefore)) before, \(ByteFormat.string(report.sizeAfter)) "
            + "\(report.dryRun ? "would be left" : "after"), cap \(ByteFormat.string(report.maxSize))"
        if report.overCap {
            out += report.kept.isEmpty ? "; still over the cap: nothing left can be evicted (what remains is staging, blobs being written, or the last models)"
                : "; still over the cap: the models kept above are protected"
        }
        guard !report.dryRun else { return out + "\n" }
        let waiting = report.evicted.compactMap { model in model.waitsIn.map { (model, $0) } }
        let freed = report.evicted.filter { $0.waitsIn == nil }.reduce(Int64(0)) { $0 + $1.bytes }
            + report.orphans.reduce(Int64(0)) { $0 + $1.bytes }
        if freed > 0 { out += "; \(ByteFormat.string(freed)) freed on disk" }
        if !waiting.isEmpty {
            let bytes = waiting.reduce(Int64(0)) { $0 + $1.0.bytes }
            let until = ISO8601DateFormatter().string(from: Date().addingTimeInterval(report.grace))
            let folders = Set(waiting.map { ($0.1 as NSString).deletingLastPathComponent }).sorted().joined(separator: ", ")
            out += "; \(ByteFormat.string(bytes)) of evicted models stay on disk in \(folders) until about \(until) "
                + "(the grace period: this is a shared filesystem, where another node may still be reading them), "
                + "when the next prune or speech-fetchd pass deletes them"
        }
        return out + "\n"
    }

    static func renderImport(_ report: ImportReport, base: URL) -> String {
        guard !report.repos.isEmpty else { return "no models in \(report.hubDirectory.path)\n" }
        var out = ""
        for repo in report.repos {
            if let commit = repo.commit {
                out += "\(repo.repo) @ \(commit.prefix(12)): \(repo.adopted) adopted (\(repo.linked.count) linked, "
                    + "\(repo.copied.count) copied, \(ByteFormat.string(repo.bytesAdopted))), "
                    + "\(repo.alreadyPresent.count) already present, \(repo.refused.count) refused\n"
            } else {
                out += "\(repo.repo):\n"
            }
            if let note = repo.note { out += "    \(note)\n" }
            for r in repo.refused { out += "    refused \(r.path): \(r.reason)\n" }
        }
        out += "\(count(report.filesAdopted, "file")) adopted (\(report.filesLinked) hard-linked, \(report.filesCopied) copied), "
            + "\(ByteFormat.string(report.bytesAdopted)); \(report.filesPresent) already present; "
            + "\(report.filesRefused) refused; from \(report.hubDirectory.path) into \(base.path)/models\n"
        return out
    }

    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
}
