// CacheCommand - `speech cache …` as one function: parse the arguments, run CacheAdmin, render text.
// The executable only forwards its arguments and prints the result.
import CacheAdmin
import Foundation

public enum CacheCommand {
    public static let usage = """
    usage: speech cache <command> [--cache-base DIR]

      ls                          every model: size on disk, complete / incomplete / in flight, last used
      verify [org/name] [--fix]   re-hash LFS files against their recorded sha256 (exit 1 when any is corrupt);
                                  --fix deletes corrupt files and re-queues them with speech-fetchd, if one runs
      rm <org/name>               delete a model (refused while it is in flight)
      clean [--older-than HOURS]  delete abandoned staging and orphaned spool entries older than HOURS (24)
      import-hf [--hf-home DIR]   adopt models from a huggingface_hub cache (DIR/hub, else HF_HUB_CACHE, else ${HF_HOME:-~/.cache/huggingface}/hub)
                                  by hard link (copy across filesystems), after checking size and digest
    """

    /// Runs `speech cache <arguments>` (the words after `cache`). Exit codes: 0 done, 1 failed
    /// (or corrupt files found, or refused), 64 bad usage.
    public static func run(_ arguments: [String],
                           environment: [String: String] = ProcessInfo.processInfo.environment) -> (output: String, exitCode: Int32) {
        if arguments.contains("-h") || arguments.contains("--help") { return (usage + "\n", 0) }
        let parsed: Arguments
        do {
            parsed = try Arguments(arguments, valued: ["cache-base", "older-than", "hf-home"], flags: ["fix"])
        } catch {
            return usageError("\(error)")
        }
        let positionals = parsed.positionals
        var options: [String: String] = [:]
        for name in ["cache-base", "older-than", "hf-home"] { if let v = parsed.value(name) { options[name] = v } }
        let flags: Set<String> = parsed.flag("fix") ? ["fix"] : []
        guard let command = positionals.first else { return (usage + "\n", 64) }
        let rest = Array(positionals.dropFirst())
        let allowed: [String: (options: Set<String>, flags: Set<String>, maxArgs: Int, minArgs: Int)] = [
            "ls": (["cache-base"], [], 0, 0),
            "verify": (["cache-base"], ["fix"], 1, 0),
            "rm": (["cache-base"], [], 1, 1),
            "clean": (["cache-base", "older-than"], [], 0, 0),
            "import-hf": (["cache-base", "hf-home"], [], 0, 0),
        ]
        if command == "help" { return (usage + "\n", 0) }
        guard let rule = allowed[command] else { return usageError("unknown cache command '\(command)'") }
        if let bad = options.keys.first(where: { !rule.options.contains($0) }) ?? flags.first(where: { !rule.flags.contains($0) }) {
            return usageError("\(command) takes no --\(bad)")
        }
        guard rest.count <= rule.maxArgs, rest.count >= rule.minArgs else {
            return usageError(command == "rm" ? "rm needs one repo id, e.g. speech cache rm org/name" : "\(command): unexpected \(rest.joined(separator: " "))")
        }
        let admin = CacheAdmin(cacheBase: options["cache-base"].map { URL(fileURLWithPath: $0) }, environment: environment,
                               knownSelections: ModelCatalog.fileSelections)
        do {
            switch command {
            case "ls":
                var out = renderList(admin.list(), base: admin.base)
                if let hf = admin.listHubCache(), !hf.models.isEmpty {
                    out += "\nhuggingface_hub cache \(hf.hub.path) (HF_HUB_CACHE, HF_HOME):\n" + renderList(hf.models, base: hf.hub)
                }
                return (out, 0)
            case "verify":
                let report = try admin.verify(repo: rest.first, fix: flags.contains("fix"))
                return (renderVerify(report, fix: flags.contains("fix")), report.isClean ? 0 : 1)
            case "rm":
                let removed = try admin.remove(repo: rest[0])
                var out = "removed \(removed.repo) (\(removed.directory.path)), freed \(ByteFormat.string(removed.bytesFreed))"
                if removed.requestsDropped > 0 { out += "; dropped \(removed.requestsDropped) settled spool requests for it" }
                return (out + "\n", 0)
            case "clean":
                var hours = 24.0
                if let raw = options["older-than"] {
                    guard let value = Double(raw.trimmingCharacters(in: .whitespaces)), value >= 0, value.isFinite else {
                        return usageError("--older-than takes a number of hours, e.g. --older-than 48")
                    }
                    hours = value
                }
                return (renderClean(admin.clean(olderThan: hours * 3600), hours: hours), 0)
            default:  // import-hf
                let report = try admin.importHF(hfHome: options["hf-home"].map { URL(fileURLWithPath: $0) })
                return (renderImport(report, base: admin.base), report.filesRefused == 0 ? 0 : 1)
            }
        } catch {
            return ("speech cache \(command): \(error)\n", 1)
        }
    }

    private static func usageError(_ message: String) -> (output: String, exitCode: Int32) {
        ("speech cache: \(message)\n\n\(usage)\n", 64)
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
        out += "\(counted(models.count, "model")), \(ByteFormat.string(total)) on disk in \(base.path)\n"
        return out
    }

    static func renderVerify(_ report: VerifyReport, fix: Bool) -> String {
        var out = ""
        for c in report.corrupt {
            out += "CORRUPT \(c.repo) \(c.path)\n    expected \(c.expected)\n    actual   \(c.actual)\n"
            if c.deleted { out += "    deleted\n" }
        }
        for line in report.skipped { out += "skipped: \(line)\n" }
        out += "\(counted(report.repos.count, "model")), \(counted(report.checkedFiles, "file")) checked, \(report.hashedFiles) re-hashed "
            + "(\(ByteFormat.string(report.hashedBytes))), \(report.corrupt.count) corrupt"
            + (report.missing > 0 ? ", \(report.missing) listed but not on disk" : "") + "\n"
        for id in report.requeued { out += "handed to speech-fetchd as spool request \(id); `speech wait` blocks until it is done\n" }
        for command in report.advice { out += "no speech-fetchd serves this cache; fetch them again with:\n    \(command)\n" }
        if !report.corrupt.isEmpty && !fix { out += "run `speech cache verify --fix` to delete the corrupt files and fetch them again\n" }
        return out
    }

    static func renderClean(_ report: CleanReport, hours: Double) -> String {
        var out = ""
        for item in report.removed { out += "removed \(item.path) (\(item.reason), \(ByteFormat.string(item.bytes)))\n" }
        for line in report.kept { out += "kept \(line)\n" }
        let age = hours == hours.rounded() ? "\(Int(hours)) h" : "\(hours) h"
        out += report.removed.isEmpty ? "nothing older than \(age) to clean\n"
            : "\(counted(report.removed.count, "item")) removed, \(ByteFormat.string(report.bytesFreed)) freed\n"
        return out
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
        out += "\(counted(report.filesAdopted, "file")) adopted (\(report.filesLinked) hard-linked, \(report.filesCopied) copied), "
            + "\(ByteFormat.string(report.bytesAdopted)); \(report.filesPresent) already present; "
            + "\(report.filesRefused) refused; from \(report.hubDirectory.path) into \(base.path)/models\n"
        return out
    }
}

/// "1 file", "3 files".
private func counted(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
