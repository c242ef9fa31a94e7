// InfoCommands - `speech models`, `wait`, `resolve` and `env`: parse, ask, print (`status`: StatusCommand).
import CommandLineKit
import Daemon
import FileEvents
import Foundation
import HubClient
import HubTypes
import ModelCache
import SpeechFetch

enum InfoCommands {
    static let modelsSpec = CommandSpec(
        name: "speech models", summary: "The model catalog: name, CLI alias, repo, size, whether it is in the cache (docs/models.md).",
        options: [CacheCommand.baseOption, .flag("json", "one JSON object per model, one per line")])
    static let waitSpec = CommandSpec(
        name: "speech wait", operands: "<org/name>",
        summary: "Block until the repo's requested files are final (exit 0), its request failed (1), or the timeout passes (2).",
        options: [CacheCommand.baseOption, .value("timeout", "S", "give up after S seconds (exit 2; the transfer goes on)")],
        minOperands: 1, maxOperands: 1,
        epilogue: "exit codes: 0 ready, 1 failed or cancelled (reason printed), 2 timeout, 64 bad usage, 130 interrupted.")
    static let cancelSpec = CommandSpec(
        name: "speech cancel", operands: "<org/name>",
        summary: """
        Withdraw the repo's requests from speech-fetchd. Waiters (`speech download`, `speech wait`) see
        "cancelled" and exit 1; the bytes already fetched stay staged, so a later download resumes.
        """,
        options: [CacheCommand.baseOption], minOperands: 1, maxOperands: 1,
        epilogue: "exit codes: 0 withdrawn, 1 nothing was requested for the repo, 64 bad usage.")
    static let resolveSpec = CommandSpec(
        name: "speech resolve", operands: "<org/name>",
        summary: "Print the commit a revision names and the file tree the Hub lists (no file bodies).",
        options: [.value("revision", "R", "branch, tag or commit (default main)"), .flag("json", "one JSON object")],
        minOperands: 1, maxOperands: 1,
        epilogue: "Honours HF_ENDPOINT, HF_TOKEN and the SPEECH_FETCH_RETRY_* settings as `speech download` does.")
    static let envSpec = CommandSpec(
        name: "speech env",
        summary: """
        What speech would use here: the Hub endpoint, where the token comes from (never the token),
        the cache base, its spool and daemon, libcurl, proxy variables, and the kernel features in use.
        """,
        options: [CacheCommand.baseOption, .flag("json", "one JSON object")])

    static func models(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(modelsSpec, words)
        let base = parsed.value("cache-base").map { URL(fileURLWithPath: $0) }
        if parsed.flag("json") {
            for entry in ModelCatalog.all {
                var object: [String: Any] = ["model": entry.displayName, "aliases": entry.aliases, "repos": entry.repos,
                                             "task": entry.task, "cached": ModelCatalog.isCached(entry, cacheBaseDir: base)]
                if let size = entry.approximateSize { object["size"] = size }
                emitJSON(object)
            }
            exit(0)
        }
        var rows = [["model", "alias", "repo", "size", "cached"]]
        for entry in ModelCatalog.all {
            let size = entry.approximateSize.map { Format.bytes($0) } ?? "?"
            let cached = ModelCatalog.isCached(entry, cacheBaseDir: base) ? "yes" : "no"
            rows.append([entry.displayName, entry.aliases.first ?? "", entry.repos.joined(separator: " + "), size, cached])
        }
        emit(table(rows))
        exit(0)
    }

    static func table(_ rows: [[String]]) -> String {
        let columns = rows.first?.count ?? 0
        let widths = (0..<columns).map { c in rows.map { $0[c].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        }.joined()
    }

    static func wait(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(waitSpec, words)
        let repo = parsed.operands[0]
        do { _ = try RepoID(repo) } catch { speechProgram.usageError("speech wait: \(error)", help: waitSpec.name) }
        var timeout: Double?
        if let raw = parsed.value("timeout") {
            guard let value = Double(raw), value >= 0, value.isFinite else {
                speechProgram.usageError("speech wait: --timeout takes seconds, e.g. --timeout 60, not '\(raw)'", help: waitSpec.name)
            }
            timeout = value
        }
        let interrupt = StopSignal()
        interrupt.install()
        let base = parsed.value("cache-base")
        do {
            let outcome = try HuggingFaceDownloader().wait(
                repo: repo, cacheBaseDir: base.map { URL(fileURLWithPath: $0) },
                timeout: timeout, isCancelled: { interrupt.isRaised })
            if case .complete(let directory) = outcome { emit("\(repo): ready in \(directory)\n") }
            exit(0)
        } catch is CancellationError {
            speechProgram.fail("stopped waiting; the transfer goes on", code: ExitCode.interrupted)
        } catch HandoffError.timedOut {
            speechProgram.fail("timed out waiting for \(repo); the transfer goes on", code: ExitCode.timeout)
        } catch {
            speechProgram.fail(Messages.describe(error, baseArgument: base.map { " --cache-base \(shellQuoted($0))" } ?? ""))
        }
    }

    static func cancel(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(cancelSpec, words)
        let repo = parsed.operands[0]
        do { _ = try RepoID(repo) } catch { speechProgram.usageError("speech cancel: \(error)", help: cancelSpec.name) }
        let base = parsed.value("cache-base")
        do {
            let withdrawn = try HuggingFaceDownloader().cancel(repo: repo, cacheBaseDir: base.map { URL(fileURLWithPath: $0) })
            guard !withdrawn.isEmpty else { speechProgram.fail("nothing is requested for \(repo) in this cache base; nothing to cancel") }
            for request in withdrawn {
                emit("cancelled \(request.repo) (request \(request.id)): \(request.unfinished.count) unfinished files keep their staged bytes "
                     + "in \(request.modelDir)/.incomplete\n")
            }
            exit(0)
        } catch {
            speechProgram.fail(Messages.describe(error))
        }
    }

    static func resolve(_ words: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Never {
        let parsed = speechProgram.parse(resolveSpec, words)
        let repo: RepoID
        do { repo = try RepoID(parsed.operands[0]) } catch { speechProgram.usageError("speech resolve: \(error)", help: resolveSpec.name) }
        if let warning = HubEndpoint.ignoredValueWarning(environment) { speechProgram.warn(warning) }
        RetryEvents.watch { event in write("speech: \(Messages.retryLine(event))\n", to: STDERR_FILENO) }
        do {
            // The downloader's client: HF_ENDPOINT, HF_TOKEN, SPEECH_FETCH_RETRY_*, the stall guard.
            let client = HuggingFaceDownloader(environment: environment).client
            let snapshot = try client.snapshot(of: repo, revision: parsed.value("revision") ?? "main")
            if parsed.flag("json") {
                emitJSON(["repo": repo.description, "revision": snapshot.revision, "commit": snapshot.commit, "endpoint": client.endpoint.url,
                          "files": snapshot.files.map { file -> [String: Any] in
                              var o: [String: Any] = ["path": file.path, "size": file.size, "lfs": file.isLFS]
                              if let sha = file.sha256 { o["sha256"] = sha }
                              return o
                          }] as [String: Any])
                exit(0)
            }
            emit("\(repo) @ \(snapshot.commit) (\(client.endpoint))\n")
            for file in snapshot.files {
                emit(String(format: "%12lld  %@  %@", file.size, file.isLFS ? "lfs" : "git", file.path) + "\n")
            }
            exit(0)
        } catch {
            speechProgram.fail(Messages.describe(error, environment: environment))
        }
    }
}
