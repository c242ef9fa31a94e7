// DownloadCommand - `speech download`: parse, run the downloader, print progress and the result.
import ByteUnits
import CommandLineKit
import Daemon
import Foundation
import HubClient
import HubTypes
import ModelCache
import SharedFiles
import SpeechFetch

enum DownloadCommand {
    static let spec = CommandSpec(
        name: "speech download", operands: "<org/name | model> [FILE]...",
        summary: """
        Download a model repo (org/name) or a catalog model (`speech models`) into the cache, with
        progress; resumable after Ctrl-C or a crash. FILEs name files of an org/name repo to fetch
        (like --include without wildcards).
        """,
        options: [
            .value("revision", "R", "branch, tag or commit (default main)"),
            .value("include", "GLOB", "fetch only matching files (repeatable; `*` crosses /)"),
            .value("exclude", "GLOB", "leave out matching files (repeatable)"),
            Option.value("cache-dir", "DIR", "the model's own directory (instead of <base>/models/<org>/<name>); also --local-dir")
                .alias("local-dir"),
            CacheCommand.baseOption,
            .optionalValue("hf-cache", "DIR", "write a huggingface_hub cache instead (DIR, else HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)"),
            .value("token", "TOKEN", "Hub token for this call instead of HF_TOKEN; `-` reads it from stdin (never echoed)"),
            .flag("force-download", "fetch the selected files again even when cached (in this process)"),
            .value("repo-type", "TYPE", "hf's flag: model, the default, is the only type speech fetches"),
            .flag("offline", "use only the cache (as HF_HUB_OFFLINE=1)"),
            .flag("dry-run", "print what would be fetched, with sizes; write nothing"),
            .flag("json", "one JSON object per progress, retry and result event"),
            .flag("quiet", short: "q", "no progress or summary on stderr (stdout is the model directory either way; errors still go to stderr)"),
            .flag("detach", "hand the transfer to speech-fetchd (started if none serves the base) and return"),
            .value("max-rate", "RATE", "cap this call's download rate over all its connections: 20M, 500K (1024-based) or bytes per second; fetches in this process"),
            Option.value("max-workers", "N", short: "x", "ranges and files this process fetches at once, 1 to 16 (default 16, HF_DOWNLOAD_RANGE_CONCURRENCY); also --connections")
                .alias("connections"),
        ],
        minOperands: 1, maxOperands: nil,
        epilogue: """
        stdout is the model directory, one line (a catalog model: one line per repo), as hf download
        prints it, so dir=$(speech download org/name) works; progress and the summary go to stderr.
        On a terminal one redrawn line shows the whole file set; piped, a line per finished file and
        a progress line at least every 5 s; HF_HUB_DISABLE_PROGRESS_BARS=1 turns progress off.
        Each retry prints one line (what failed, attempt k of n, the wait).
        hf download's flags here: --local-dir DIR is --cache-dir DIR (the model's files, at their repo
        paths); hf's --cache-dir DIR (a huggingface_hub cache root) is --hf-cache DIR; --cache-base
        is this cache's own root (<base>/models/<org>/<name>), which hf does not have. --token and
        --force-download are hf's. HF_HUB_ENABLE_HF_TRANSFER has no effect: ranges are built in.
        exit codes: 0 done, 1 failed, 64 bad usage, 130 interrupted (what was fetched is kept).
        """,
        optionHints: [
            "local-dir-use-symlinks": "speech writes real files under --cache-dir (or a huggingface_hub cache with --hf-cache)",
            "resume-download": "speech always resumes: what an interrupted call staged under .incomplete/ is kept",
        ])

    /// What the user asked for, in the command line's words.
    struct Request {
        var repo: String
        var files: [String] = []
        var revision = "main"
        var include: [String] = []
        var exclude: [String] = []
        var cacheDir: String?
        var cacheBase: String?
        /// `--hf-cache`: nil when not given, "" for the default huggingface_hub cache.
        var hubCache: String?
        var offline = false
        var dryRun = false
        var json = false
        var quiet = false
        var detach = false
        /// `--token`, read (from stdin for `-`); never printed.
        var token: String?
        var force = false
        /// `--max-rate` in bytes per second (RateCap), nil for no cap.
        var maxRate: Int64?
        /// `--max-workers` (`-x`, `--connections`): requests in flight in this process, 1...16.
        var maxWorkers: Int?

        /// ` --cache-base DIR` or ` --cache-dir DIR` as given, for suggested commands.
        var baseArgument: String {
            if let cacheDir { return " --cache-dir \(shellQuoted(cacheDir))" }
            if let cacheBase { return " --cache-base \(shellQuoted(cacheBase))" }
            return ""
        }
    }

    static func run(_ words: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Never {
        let parsed = speechProgram.parse(spec, words)
        var request = Request(repo: parsed.operands[0])
        request.files = Array(parsed.operands.dropFirst())
        request.revision = parsed.value("revision") ?? "main"
        request.include = parsed.values("include")
        request.exclude = parsed.values("exclude")
        request.cacheDir = parsed.value("cache-dir")
        if let dir = request.cacheDir, let names = try? FileManager.default.contentsOfDirectory(atPath: dir),
           names.contains(where: { $0.hasPrefix(HubRepoFolder.folderPrefix) }) {
            // hf's --cache-dir names a huggingface_hub cache root; ours names the model's own
            // folder: loose files written into that root would sit beside its models--* folders.
            speechProgram.usageError("speech download: --cache-dir \(dir) is a huggingface_hub cache (it holds \(HubRepoFolder.folderPrefix)* folders); "
                + "--cache-dir names the model's own folder here: write into that cache with --hf-cache \(shellQuoted(dir))")
        }
        request.cacheBase = parsed.value("cache-base")
        request.hubCache = parsed.value("hf-cache")
        request.offline = parsed.flag("offline")
        request.dryRun = parsed.flag("dry-run")
        request.json = parsed.flag("json")
        request.quiet = parsed.flag("quiet")
        request.detach = parsed.flag("detach")
        request.force = parsed.flag("force-download")
        // The caller's SPEECH_FETCH_MAX_RATE is read only without --max-rate; one that cannot be
        // read is refused as the flag would be, never silently dropped.
        if parsed.value("max-rate") == nil, let invalid = InvalidSetting.first(in: environment) {
            speechProgram.usageError("speech download: \(invalid)", help: spec.name)
        }
        if let type = parsed.value("repo-type"), type != "model" {
            speechProgram.usageError("speech download: --repo-type \(type): speech fetches model repos only "
                + "(for a \(type == "dataset" || type == "space" ? type : "repo of another type"), use `hf download --repo-type \(type)`)")
        }
        if let raw = parsed.value("max-rate") {
            guard let rate = ByteRate.parse(raw), rate >= RateCap.minimum else {
                speechProgram.usageError("speech download: --max-rate needs bytes per second of at least 1K: a number with K, M or G (1024-based, as curl's --limit-rate), like 500K or 20M, or plain bytes like 65536; not '\(raw)'", help: spec.name)
            }
            request.maxRate = rate
        }
        if let raw = parsed.value("max-workers") {
            guard let n = Int(raw), (1...16).contains(n) else {
                speechProgram.usageError("speech download: --max-workers (-x) takes a whole number of connections from 1 to 16, like 8; not '\(raw)'", help: spec.name)
            }
            request.maxWorkers = n
        }
        if let token = parsed.value("token") {
            request.token = token == "-" ? readToken() : token.trimmingCharacters(in: .whitespacesAndNewlines)
            if request.token?.isEmpty ?? true {
                speechProgram.usageError("speech download: --token \(token == "-" ? "- read no token from stdin" : "got a blank token"); give the token, or `-` and the token on stdin", help: spec.name)
            }
        }
        warnAboutHFTransfer(environment)
        if request.cacheDir != nil && request.cacheBase != nil {
            speechProgram.usageError("speech download: give --cache-dir DIR (the model's own directory) or --cache-base DIR (a base for models/<org>/<name>), not both", help: spec.name)
        }
        if request.cacheDir != nil && request.hubCache != nil {
            speechProgram.usageError("speech download: give --cache-dir DIR or --hf-cache [DIR], not both", help: spec.name)
        }
        if request.dryRun && request.hubCache != nil {
            speechProgram.usageError("speech download: --dry-run looks at the speech cache; leave out --hf-cache", help: spec.name)
        }
        if request.dryRun && request.detach {
            speechProgram.usageError("speech download: --dry-run writes nothing, so it cannot --detach", help: spec.name)
        }
        if request.force && (request.offline || request.dryRun || request.detach) {
            let other = request.offline ? "--offline" : request.dryRun ? "--dry-run" : "--detach"
            speechProgram.usageError("speech download: --force-download fetches again in this process, which \(other) does not do; drop one of them", help: spec.name)
        }
        if request.maxWorkers != nil && request.detach {
            speechProgram.usageError("speech download: --max-workers sets this process's connections, and a detached request is fetched by speech-fetchd's workers (speech-fetchd --workers, --slots); drop one of them", help: spec.name)
        }
        if request.maxRate != nil && (request.offline || request.dryRun || request.detach) {
            let other = request.offline ? "--offline" : request.dryRun ? "--dry-run" : "--detach"
            let why = request.detach ? "a detached request is fetched by speech-fetchd's workers at the node's rate (speech-fetchd --max-rate)" : "\(other) fetches nothing"
            speechProgram.usageError("speech download: --max-rate caps this call's own transfer, and \(why); drop one of them", help: spec.name)
        }
        exit(download(request, environment: environment))
    }

    /// Runs one download; returns the exit code.
    static func download(_ request: Request, environment: [String: String]) -> Int32 {
        if !request.repo.contains("/") {
            return downloadModel(catalogEntry(request), request, environment: environment)
        }
        do {
            _ = try RepoID(request.repo)
        } catch {
            speechProgram.usageError("speech download: \(error)", help: spec.name)
        }
        let downloader = makeDownloader(request, environment: environment)
        let offlineBy: String? = request.offline ? "drop --offline" : downloader.offlineByDefault ? "unset HF_HUB_OFFLINE" : nil
        if offlineBy == nil, let warning = HubEndpoint.ignoredValueWarning(environment) {  // offline, the endpoint is unused
            speechProgram.warn(warning)
        }
        let cacheDir = request.cacheDir.map { URL(fileURLWithPath: $0) }
        let cacheBase = request.cacheBase.map { URL(fileURLWithPath: $0) }
        let include = request.include + request.files
        let hubCache = request.hubCache.map { $0.isEmpty ? downloader.defaultHubCache : URL(fileURLWithPath: $0) }
        if request.dryRun {
            return printDryRun(request, downloader, include: include, cacheDir: cacheDir, cacheBase: cacheBase, offlineBy: offlineBy)
        }
        let printer = ProgressPrinter(json: request.json, quiet: request.quiet || progressBarsDisabled(environment), environment: environment)
        RetryEvents.watch { event in printer.note(Messages.retryLine(event), json: Messages.retryNotice(event)) }
        let interrupt = StopSignal()
        interrupt.install()
        let started = Date()
        let host: TransferHost = request.detach ? .detach(daemonExecutable: siblingExecutable("speech-fetchd")) : .automatic
        // `--quiet` without `--json` prints no progress and no summary: the call is given no
        // progress callback, so a wait on the daemon reads no progress from the shared filesystem
        // (every node of a job asking at once, each reading sidecars it never shows).
        let showsNothing = request.quiet && !request.json
        let update: @Sendable (DownloadProgress) -> Void = { printer.update($0) }
        let progress = showsNothing ? nil : update
        do {
            let result = try downloader.downloadBlocking(
                repo: request.repo, revision: request.revision, include: include, exclude: request.exclude,
                cacheDir: cacheDir, cacheBaseDir: cacheBase, huggingFaceCache: hubCache, offlineMode: offlineBy != nil ? true : nil,
                forceDownload: request.force, host: host, progress: progress, isCancelled: { interrupt.isRaised },
                notice: noticePrinter(request, printer))
            printer.finish()
            report(result, request, printer: printer, seconds: Date().timeIntervalSince(started))
            return 0
        } catch {
            return failed(error, request, printer: printer, offlineBy: offlineBy)
        }
    }

    /// The catalog model a name that is not org/name asks for; a usage error for an unknown name
    /// or an option that applies to org/name only.
    private static func catalogEntry(_ request: Request) -> CatalogEntry {
        guard let entry = ModelCatalog.find(request.repo) else {
            let names = ModelCatalog.all.filter { $0.variant == nil }.flatMap { [$0.name.lowercased()] + $0.aliases }
            let near = CommandSpec.nearest(to: request.repo.lowercased(), among: names).map { " (did you mean \($0)?)" } ?? ""
            speechProgram.usageError("speech download: unknown model '\(request.repo)'\(near): give org/name, or a model name from `speech models`", help: spec.name)
        }
        if request.hubCache != nil {
            speechProgram.usageError("speech download: --hf-cache takes a repo id (org/name); give the repos of '\(request.repo)' one by one (`speech models` lists them)", help: spec.name)
        }
        if !request.files.isEmpty || !request.include.isEmpty || !request.exclude.isEmpty || parsedRevision(request) {
            speechProgram.usageError("speech download: \(entry.displayName) is a catalog model, which names its own files and revision; FILE, --include, --exclude and --revision apply to org/name", help: spec.name)
        }
        if request.force {
            speechProgram.usageError("speech download: --force-download takes an org/name (the catalog model \(entry.displayName) needs \(entry.repos.joined(separator: " + ")))", help: spec.name)
        }
        if request.dryRun {
            speechProgram.usageError("speech download: --dry-run takes an org/name (the catalog model \(entry.displayName) needs \(entry.repos.joined(separator: " + ")))", help: spec.name)
        }
        return entry
    }

    /// `--dry-run`: the plan printed, nothing fetched; returns the exit code.
    private static func printDryRun(_ request: Request, _ downloader: HuggingFaceDownloader, include: [String],
                                    cacheDir: URL?, cacheBase: URL?, offlineBy: String?) -> Int32 {
        if offlineBy != nil {
            speechProgram.usageError("speech download: --dry-run asks the Hub what to fetch; \(request.offline ? "drop --offline" : "unset HF_HUB_OFFLINE")", help: spec.name)
        }
        do {
            let plan = try downloader.plan(repo: request.repo, revision: request.revision, include: include, exclude: request.exclude,
                                           cacheDir: cacheDir, cacheBaseDir: cacheBase)
            printPlan(plan, request)
            return 0
        } catch {
            return failed(error, request, printer: nil)
        }
    }

    /// How a download's notices (hand-over, a daemon gone, a wait) reach the user: a line on
    /// stderr, or a `--json` event.
    private static func noticePrinter(_ request: Request, _ printer: ProgressPrinter) -> @Sendable (DownloadNotice) -> Void {
        { notice in
            switch notice {
            case .handedToDaemon(let spool):
                printer.note("speech-fetchd serving \(spool) fetches \(request.repo); Ctrl-C stops only this wait",
                             json: NoteEvent.daemon(spool: spool))
            case .notHandedOver(let reason):
                printer.note(reason, json: NoteEvent.notHandedOver(reason: reason))
            case .daemonGone(let spool):
                printer.note("speech-fetchd is gone from \(spool); this process finishes the transfer itself from what it staged",
                             json: NoteEvent.daemonGone(spool: spool))
            case .waiting(let what):
                printer.note(what, json: NoteEvent.waiting(message: what))
            }
        }
    }

    /// What a finished download tells: warnings on stderr; then the `--json` event, or the model
    /// directory alone on stdout (as `hf download`) and what happened on stderr.
    private static func report(_ result: DownloadResult, _ request: Request, printer: ProgressPrinter, seconds: Double) {
        if let warning = result.warning { speechProgram.warn(warning) }
        for miss in result.unmatchedPatterns {
            speechProgram.warn("--include \(shellQuoted(miss.pattern)) matches no file of \(request.repo); nothing was fetched for it"
                               + (miss.nearPaths.isEmpty ? "" : " (did you mean \(miss.nearPaths.map(shellQuoted).joined(separator: ", "))? `speech resolve \(request.repo)` lists every file)"))
        }
        if request.json, result.handedOver, result.fetched.isEmpty, let id = result.requestID {
            // --detach: the request was handed over; nothing is fetched yet.
            printer.emitEvent(AcceptedEvent(requestId: id, repo: request.repo, directory: result.directory.path, files: result.files,
                                            commit: result.commit, daemonPid: result.startedDaemon.map { Int($0.pid) },
                                            daemonLog: result.startedDaemon?.log))
        } else if request.json {
            let unmatched = result.unmatchedPatterns.map { DoneEvent.UnmatchedPattern(pattern: $0.pattern, nearPaths: $0.nearPaths) }
            printer.emitEvent(DoneEvent(directory: result.directory.path, files: result.files, fetched: result.fetched, seconds: seconds,
                                        averageBytesPerSecond: Int(printer.averageRate), commit: result.commit, warning: result.warning,
                                        unmatchedPatterns: unmatched.isEmpty ? nil : unmatched,
                                        daemonPid: result.startedDaemon.map { Int($0.pid) }, daemonLog: result.startedDaemon?.log))
        } else {
            // As `hf download`: stdout is the model directory alone, so `$(speech download …)`
            // is the path; what happened goes to stderr (nothing with --quiet).
            if request.quiet {
                // the path alone
            } else if result.handedOver && result.fetched.isEmpty {
                if let daemon = result.startedDaemon {
                    say("started speech-fetchd (pid \(daemon.pid), log \(daemon.log)); it runs until `speech stop\(request.cacheBase.map { " --cache-base \(shellQuoted($0))" } ?? "")`")
                }
                say("\(request.repo): handed to speech-fetchd; `speech wait \(request.repo)\(request.baseArgument.replacingOccurrences(of: "--cache-dir", with: "--cache-base"))` blocks until it is ready")
            } else {
                let rate = printer.bytesMoved > 0 ? ", \(ByteFormat.rate(Int64(printer.averageRate))) average" : ""
                say("\(request.repo): \(counted(result.files.count, "file")) in \(result.directory.path) (\(result.fetched.count) fetched, "
                    + "\(String(format: "%.1f", seconds)) s\(rate))")
            }
            emit(result.directory.path + "\n")
        }
    }

    private static func parsedRevision(_ request: Request) -> Bool { request.revision != "main" }

    /// Where an org/name download stages (`<dir>/.incomplete`): `--cache-dir`, the repo folder of
    /// `--hf-cache`, or `<base>/models/<org>/<name>`.
    static func modelDirectory(_ request: Request, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let cacheDir = request.cacheDir { return cacheDir }
        let base = request.cacheBase.map { URL(fileURLWithPath: $0) } ?? CacheLocation.defaultBase(environment)
        if !request.repo.contains("/"), let entry = ModelCatalog.find(request.repo) {  // a catalog model: its first repo's
            let repos = entry.repos.compactMap { try? RepoID($0) }
            if let first = repos.first { return CacheLocation.modelDirectory(base: base, repo: first).path }
        }
        guard let repo = try? RepoID(request.repo) else { return "the model directory" }
        if let hubCache = request.hubCache {
            let root = hubCache.isEmpty ? HubCache.defaultDirectory(environment) : URL(fileURLWithPath: hubCache)
            return HubRepoFolder(hub: root, repo: repo).path
        }
        return CacheLocation.modelDirectory(base: base, repo: repo).path
    }

    /// The token from stdin (`--token -`): the first line, at most 4 KiB, trimmed.
    private static func readToken() -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < 4096, read(STDIN_FILENO, &byte, 1) == 1, byte != UInt8(ascii: "\n") { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// huggingface_hub's switch for hf_transfer: said once, as it changes nothing here.
    static func warnAboutHFTransfer(_ environment: [String: String]) {
        guard EnvironmentFlag.isOn("HF_HUB_ENABLE_HF_TRANSFER", in: environment) else { return }
        speechProgram.warn("HF_HUB_ENABLE_HF_TRANSFER has no effect here: speech fetches large files as concurrent byte ranges itself "
                           + "(HF_DOWNLOAD_RANGE_CONCURRENCY, HF_DOWNLOAD_RANGE_CHUNK), so there is nothing to switch on")
    }

    /// Prints the failure (one line; a JSON event too with --json) and returns the exit code.
    static func failed(_ error: Error, _ request: Request, printer: ProgressPrinter?, offlineBy: String? = nil,
                       catalog: Bool = false) -> Int32 {
        printer?.finish()
        if error is CancellationError {
            let dir = modelDirectory(request)
            speechProgram.fail("interrupted; what was transferred is kept under \(dir)/.incomplete; run the same command again to resume",
                               code: ExitCode.interrupted)
        }
        var message = Messages.describe(error, baseArgument: request.baseArgument, offlineBy: offlineBy, catalog: catalog)
        if request.token != nil { message = Messages.tokenFromFlag(message) }
        if request.json { emit(NoteEvent.error(message: message).line) }
        if case RepoError.invalidRepoID = error { speechProgram.fail(message, code: ExitCode.usage) }
        speechProgram.fail(message)
    }

    private static func printPlan(_ plan: DownloadPlan, _ request: Request) {
        if request.json {
            emit(PlanEvent(directory: plan.directory.path, commit: plan.commit, bytesToFetch: plan.bytesToFetch,
                           files: plan.files.map { PlanEvent.PlannedFile(path: $0.path, size: $0.size, cached: $0.cached) }).line)
            return
        }
        let width = plan.files.map { ByteFormat.string($0.size).count }.max() ?? 0
        for file in plan.files {
            let size = ByteFormat.string(file.size)
            emit(String(repeating: " ", count: width - size.count) + size + "  " + (file.cached ? "cached  " : "fetch   ")
                 + TerminalText.escaped(file.path) + "\n")
        }
        let fetch = plan.files.filter { !$0.cached }
        emit("dry run: \(request.repo) @ \(plan.commit.prefix(12)) would fetch \(fetch.count) of \(counted(plan.files.count, "file")) "
             + "(\(ByteFormat.string(plan.bytesToFetch))) into \(plan.directory.path); nothing was written\n")
    }

    /// The downloader for one call: the environment's settings, with the call's `--max-rate`.
    static func makeDownloader(_ request: Request, environment: [String: String]) -> HuggingFaceDownloader {
        var settings = DownloadSettings.fromEnvironment(environment)
        if let rate = request.maxRate { settings.maxRate = rate }
        if let workers = request.maxWorkers { settings.concurrency = workers }
        return HuggingFaceDownloader(environment: environment, settings: settings, token: request.token)
    }

    /// `speech download <model name>`: every repo the catalog entry needs.
    static func downloadModel(_ entry: CatalogEntry, _ request: Request, environment: [String: String]) -> Int32 {
        let printer = ProgressPrinter(json: request.json, quiet: request.quiet || progressBarsDisabled(environment), environment: environment)
        RetryEvents.watch { event in printer.note(Messages.retryLine(event), json: Messages.retryNotice(event)) }
        let interrupt = StopSignal()
        interrupt.install()
        let host: TransferHost = request.detach ? .detach(daemonExecutable: siblingExecutable("speech-fetchd")) : .automatic
        let downloader = makeDownloader(request, environment: environment)
        let offlineBy: String? = request.offline ? "drop --offline" : downloader.offlineByDefault ? "unset HF_HUB_OFFLINE" : nil
        do {
            let model = try ModelCatalog.downloadBlocking(
                entry, cacheDir: request.cacheDir.map { URL(fileURLWithPath: $0) },
                cacheBaseDir: request.cacheBase.map { URL(fileURLWithPath: $0) },
                offlineMode: offlineBy != nil ? true : nil, host: host,
                progress: { printer.update($0.transfer) }, isCancelled: { interrupt.isRaised },
                downloader: downloader)
            printer.finish()
            for warning in model.warnings { speechProgram.warn(warning) }
            for part in model.components {
                if request.json {
                    emit(ComponentDoneEvent(model: entry.displayName, role: part.role.rawValue, repo: part.repo,
                                            directory: part.directory.path, files: part.files, fetched: part.fetched).line)
                } else {
                    if !request.quiet {
                        say("\(entry.displayName) \(part.role.rawValue): \(part.repo) → \(part.directory.path) (\(counted(part.files.count, "file")), \(part.fetched.count) fetched)")
                    }
                    emit(part.directory.path + "\n")  // one directory a line: the model's folders, as `hf download` prints one
                }
            }
            return 0
        } catch {
            return failed(error, request, printer: printer, offlineBy: offlineBy, catalog: true)
        }
    }

    /// HF_HUB_DISABLE_PROGRESS_BARS as huggingface_hub reads it.
    static func progressBarsDisabled(_ environment: [String: String]) -> Bool {
        EnvironmentFlag.isOn("HF_HUB_DISABLE_PROGRESS_BARS", in: environment)
    }
}

/// A program installed beside this one (speech-fetchd next to speech).
func siblingExecutable(_ name: String) -> String {
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent(name).path
}
