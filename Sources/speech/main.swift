// speech - the command-line front of speech-fetch: parsing and printing only.
import Daemon
import Foundation
import HubClient
import SpeechFetch
import TestHub

let usage = """
usage: speech <command> [options]

commands:
  download <org/name | model> [--revision R] [--include GLOB]... [--cache-dir DIR | --cache-base DIR] [--hf-cache [DIR]] [--offline] [--json] [--detach]
        download a model repo into the cache, with progress; resumable after Ctrl-C or a crash
        --hf-cache: write a huggingface_hub cache instead (DIR, else HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)
        --detach: hand the transfer to speech-fetchd (started if none serves the base) and return at once
  models [--cache-base DIR]
        the model catalog: name, CLI alias, repo, size, whether it is in the cache
  cache ls | verify [repo] [--fix] | rm <repo> | clean [--older-than HOURS] | import-hf [--hf-home DIR]  [--cache-base DIR]
        manage the cache: list, re-hash, remove, clean up, adopt a huggingface_hub cache
  wait <org/name> [--cache-base DIR] [--timeout S]
        block until the repo's requested files are final (exit 0), its request failed (1), or timeout (2)
  status [--cache-base DIR]
        requests, jobs per file, workers per node
  resolve <org/name> [--revision R]
        print the commit and the file tree the Hub lists (no file bodies)
  demo [--size BYTES] [--cache-base DIR]
        start the bundled test Hub on loopback with a demo repo and download it with progress
  help  this text

environment: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, QWEN3_CACHE_DIR, HF_DOWNLOAD_RANGE_THRESHOLD,
  HF_DOWNLOAD_RANGE_CHUNK, HF_DOWNLOAD_RANGE_CONCURRENCY, HF_DOWNLOAD_STALL_TIMEOUT,
  SPEECH_FETCH_RETRY_ATTEMPTS, SPEECH_FETCH_RETRY_DELAYS (see docs/cache-and-offline.md)
"""

/// Exits with a one-line reason.
func die(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("speech: \(message)\n".utf8))
    exit(code)
}

func runDownload(_ args: Arguments, environment: [String: String] = ProcessInfo.processInfo.environment,
                 repoOverride: String? = nil, cacheBaseOverride: URL? = nil) -> Int32 {
    guard let repo = repoOverride ?? args.positionals.first else { die("download needs a repo id or a model name, e.g. speech download kokoro", code: 64) }
    if !repo.contains("/") {
        guard let entry = ModelCatalog.find(repo) else {
            die("unknown model '\(repo)': give org/name, or a model name from `speech models`", code: 64)
        }
        if args.value("hf-cache") != nil {
            die("--hf-cache takes a repo id (org/name); give the repos of '\(repo)' one by one (`speech models` lists them)", code: 64)
        }
        return runModelDownload(entry, args, environment: environment)
    }
    let downloader = HuggingFaceDownloader(environment: environment)
    let offline = args.flag("offline") || downloader.offlineByDefault
    if !offline, let warning = HubEndpoint.ignoredValueWarning(environment) {  // offline, the endpoint is unused
        FileHandle.standardError.write(Data("speech: warning: \(warning)\n".utf8))
    }
    let printer = ProgressPrinter(json: args.flag("json"))
    let interrupt = StopSignal()
    interrupt.install()
    let cacheDir = args.value("cache-dir").map { URL(fileURLWithPath: $0) }
    let cacheBase = cacheBaseOverride ?? args.value("cache-base").map { URL(fileURLWithPath: $0) }
    let hubCache = args.value("hf-cache").map { $0.isEmpty ? downloader.defaultHubCache : URL(fileURLWithPath: $0) }
    let started = Date()
    let host: TransferHost = args.flag("detach") ? .detach(daemonExecutable: siblingExecutable("speech-fetchd")) : .automatic
    do {
        let result = try downloader.downloadBlocking(
            repo: repo, revision: args.value("revision") ?? "main", include: args.values("include"),
            cacheDir: cacheDir, cacheBaseDir: cacheBase, huggingFaceCache: hubCache, offlineMode: offline ? true : nil,
            host: host, progress: { printer.update($0) }, isCancelled: { interrupt.isRaised })
        printer.finish()
        if let warning = result.warning { FileHandle.standardError.write(Data("speech: warning: \(warning)\n".utf8)) }
        let seconds = Date().timeIntervalSince(started)
        if printer.style == .json {
            var summary: [String: Any] = ["event": "done", "directory": result.directory.path, "files": result.files,
                                          "fetched": result.fetched, "seconds": seconds]
            if let commit = result.commit { summary["commit"] = commit }
            if let warning = result.warning { summary["warning"] = warning }
            printer.emitJSON(summary)
        } else if result.handedOver && result.fetched.isEmpty {
            emit("\(repo): handed to speech-fetchd; `speech wait \(repo)` blocks until it is ready\n")
        } else {
            emit("\(repo): \(result.files.count) files in \(result.directory.path) (\(result.fetched.count) fetched, \(String(format: "%.1f", seconds)) s)\n")
        }
        return 0
    } catch is CancellationError {
        printer.finish()
        let dir = cacheDir?.path ?? "the model directory"
        die("interrupted; what was transferred is kept under \(dir)/.incomplete — run the same command again to resume", code: 130)
    } catch {
        printer.finish()
        if printer.style == .json { printer.emitJSON(["event": "error", "message": "\(error)"]) }
        die("\(error)")
    }
}

/// `speech download <model name>`: every repo the catalog entry needs.
func runModelDownload(_ entry: CatalogEntry, _ args: Arguments, environment: [String: String]) -> Int32 {
    let printer = ProgressPrinter(json: args.flag("json"))
    let interrupt = StopSignal()
    interrupt.install()
    let host: TransferHost = args.flag("detach") ? .detach(daemonExecutable: siblingExecutable("speech-fetchd")) : .automatic
    do {
        let model = try ModelCatalog.downloadBlocking(
            entry, cacheDir: args.value("cache-dir").map { URL(fileURLWithPath: $0) },
            cacheBaseDir: args.value("cache-base").map { URL(fileURLWithPath: $0) },
            offlineMode: args.flag("offline") ? true : nil, host: host,
            progress: { printer.update($0.transfer) }, isCancelled: { interrupt.isRaised },
            downloader: HuggingFaceDownloader(environment: environment))
        printer.finish()
        for warning in model.warnings { FileHandle.standardError.write(Data("speech: warning: \(warning)\n".utf8)) }
        for part in model.components {
            emit("\(entry.displayName) \(part.role.rawValue): \(part.repo) → \(part.directory.path) (\(part.files.count) files, \(part.fetched.count) fetched)\n")
        }
        return 0
    } catch is CancellationError {
        printer.finish()
        die("interrupted; run the same command again to resume", code: 130)
    } catch {
        printer.finish()
        die("\(error)")
    }
}

func runModels(_ args: Arguments) -> Int32 {
    let base = args.value("cache-base").map { URL(fileURLWithPath: $0) }
    var rows = [["model", "alias", "repo", "size", "cached"]]
    for entry in ModelCatalog.all {
        let size = entry.approximateSize.map { Format.bytes($0) } ?? "?"
        let cached = ModelCatalog.isCached(entry, cacheBaseDir: base) ? "yes" : "no"
        rows.append([entry.displayName, entry.aliases.first ?? "", entry.repos.joined(separator: " + "), size, cached])
    }
    let widths = (0..<5).map { c in rows.map { $0[c].count }.max() ?? 0 }
    for row in rows {
        emit(row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
            .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n")
    }
    return 0
}

/// A program installed beside this one (speech-fetchd next to speech).
func siblingExecutable(_ name: String) -> String {
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent(name).path
}

func runWait(_ args: Arguments) -> Int32 {
    guard let repo = args.positionals.first else { die("wait needs a repo id", code: 64) }
    let interrupt = StopSignal()
    interrupt.install()
    do {
        let outcome = try HuggingFaceDownloader().wait(
            repo: repo, cacheBaseDir: args.value("cache-base").map { URL(fileURLWithPath: $0) },
            timeout: args.value("timeout").flatMap { Double($0) }, isCancelled: { interrupt.isRaised })
        if case .complete(let directory) = outcome { emit("\(repo): ready in \(directory)\n") }
        return 0
    } catch is CancellationError {
        die("stopped waiting; the transfer goes on", code: 130)
    } catch HandoffError.timedOut {
        die("timed out waiting for \(repo); the transfer goes on", code: 2)
    } catch {
        die("\(error)")
    }
}

func runStatus(_ args: Arguments) -> Int32 {
    let base = args.value("cache-base").map { URL(fileURLWithPath: $0) } ?? HuggingFaceDownloader().defaultCacheBase
    do {
        emit(try SpoolStatus.report(cacheBase: base))
        return 0
    } catch {
        die("\(error)")
    }
}

func runResolve(_ args: Arguments) -> Int32 {
    guard let raw = args.positionals.first else { die("resolve needs a repo id", code: 64) }
    do {
        let repo = try RepoID(raw)
        let client = HubClient()
        let snapshot = try client.snapshot(of: repo, revision: args.value("revision") ?? "main")
        print("\(repo) @ \(snapshot.commit) (\(client.endpoint))")
        for file in snapshot.files {
            print(String(format: "%12lld  %@  %@", file.size, file.isLFS ? "lfs" : "git", file.path))
        }
        return 0
    } catch {
        die("\(error)")
    }
}

func runDemo(_ args: Arguments) -> Int32 {
    let size = args.value("size").flatMap { Int($0) } ?? (256 << 20)
    let temp = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("speech-demo-\(getpid())")
    let root = temp.appendingPathComponent("hub")
    let base = args.value("cache-base").map { URL(fileURLWithPath: $0) } ?? temp.appendingPathComponent("cache")
    defer { try? FileManager.default.removeItem(at: root) }
    do {
        let shard = max(1, size / 4)
        var files: [String: Int] = [:]
        for i in 1...4 { files["model-0000\(i)-of-00004.safetensors"] = shard }
        files["model.safetensors"] = shard * 4   // a consolidated copy the index does not name: never fetched
        try TestHub.generateRepo(root: root, repo: "demo/Speech-Demo-Model", files: files)
        let weightMap = (1...4).map { "\"layer\($0).weight\": \"model-0000\($0)-of-00004.safetensors\"" }.joined(separator: ", ")
        try TestHub.writeRepo(root: root, repo: "demo/Speech-Demo-Model", files: [
            "model.safetensors.index.json": Data("{\"metadata\": {}, \"weight_map\": {\(weightMap)}}".utf8),
            "config.json": Data("{\"model_type\": \"demo\"}".utf8),
            "tokenizer/vocab.json": Data("{\"a\": 0, \"b\": 1}".utf8),
        ])
        let hub = try TestHub(root: root)
        defer { hub.stop() }
        emit("test Hub at \(hub.baseURL); downloading demo/Speech-Demo-Model into \(base.path)\n")
        var env = ProcessInfo.processInfo.environment
        env["HF_ENDPOINT"] = hub.baseURL
        env["HF_HUB_OFFLINE"] = nil
        let code = runDownload(args, environment: env, repoOverride: "demo/Speech-Demo-Model", cacheBaseOverride: base)
        return code
    } catch {
        die("demo failed: \(error)")
    }
}

// Run by the speech-fetchd executable (docs/architecture.md, "Start-up"): be the daemon. The
// variable holds that executable's absolute path, which the workers are started with.
if let fetchd = ProcessInfo.processInfo.environment[FetchdCommand.environmentKey], fetchd.hasPrefix("/") {
    unsetenv(FetchdCommand.environmentKey)  // not inherited by anything the daemon starts
    FetchdCommand.run(arguments: Array(CommandLine.arguments.dropFirst()), executable: fetchd)
}

var argv = Array(CommandLine.arguments.dropFirst())
let command = argv.isEmpty ? "help" : argv.removeFirst()
do {
    switch command {
    case "download":
        exit(runDownload(try Arguments(argv, valued: ["revision", "include", "cache-dir", "cache-base"],
                                       flags: ["offline", "json", "detach"], optionalValue: ["hf-cache"])))
    case "cache":
        let result = CacheCommand.run(argv)
        emit(result.output)
        exit(result.exitCode)
    case "models":
        exit(runModels(try Arguments(argv, valued: ["cache-base"], flags: [])))
    case "wait":
        exit(runWait(try Arguments(argv, valued: ["cache-base", "timeout"], flags: [])))
    case "status":
        exit(runStatus(try Arguments(argv, valued: ["cache-base"], flags: [])))
    case "resolve":
        exit(runResolve(try Arguments(argv, valued: ["revision"], flags: [])))
    case "demo":
        exit(runDemo(try Arguments(argv, valued: ["size", "cache-base"], flags: ["json"])))
    case "help", "--help", "-h":
        print(usage)
    default:
        die("unknown command '\(command)'\n\(usage)", code: 64)
    }
} catch {
    die("\(error)\n\(usage)", code: 64)
}
