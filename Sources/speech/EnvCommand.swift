// EnvCommand - `speech env`: what speech would use on this machine, for bug reports and setup.
import CommandLineKit
import FileEvents
import Foundation
import HubClient
import SharedFiles
import SpeechFetch

enum EnvCommand {
    static let spec = CommandSpec(
        name: "speech env",
        summary: """
        What speech would use here: the Hub endpoint, where the token comes from (never the token),
        the cache base, its spool and daemon, libcurl, proxy variables, and the kernel features in use.
        """,
        options: [CacheCommand.baseOption, .flag("json", "one JSON object")])

    static func run(_ words: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Never {
        let parsed = speechProgram.parse(spec, words)
        let downloader = HuggingFaceDownloader(environment: environment)
        let base = parsed.value("cache-base").map { URL(fileURLWithPath: $0) } ?? downloader.defaultCacheBase
        let baseSource = parsed.value("cache-base") != nil ? "--cache-base"
            : environment["QWEN3_CACHE_DIR"].map { _ in "QWEN3_CACHE_DIR" } ?? "default"
        let admin = CacheAdmin(cacheBase: base, environment: environment, knownSelections: ModelCatalog.fileSelections)
        let spool = admin.spoolDirectory
        let endpointSource = HubEndpoint.ignoredValueWarning(environment) != nil ? "HF_ENDPOINT ignored: not a full URL"
            : environment["HF_ENDPOINT"].map { _ in "HF_ENDPOINT" } ?? "default"
        let proxyNames = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"]
        let proxies = proxyNames.compactMap { name in environment[name].map { (name, Messages.redacted($0)) } }
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        let hasGetxattrat = numbers.count == 2 && (numbers[0], numbers[1]) >= (6, 13)
        let spoolExists = FileManager.default.fileExists(atPath: spool)
        let hubCacheSource = environment["HF_HUB_CACHE"].map { _ in "HF_HUB_CACHE" }
            ?? environment["HF_HOME"].map { _ in "HF_HOME" } ?? "default"
        let token = HubToken.source(environment)
        // (name, value, where the value comes from): printed as "value (source)", in JSON as
        // "name" and "name_source".
        var rows: [(String, String, String?)] = [
            ("version", "\(BuildInfo.version) (commit \(BuildInfo.commit ?? "unknown"))", nil),
            ("endpoint", HubEndpoint.fromEnvironment(environment).url, endpointSource),
            ("token", token != nil ? "set" : "none (public repos only)", token),
            ("offline", downloader.offlineByDefault ? "yes" : "no", downloader.offlineByDefault ? "HF_HUB_OFFLINE" : nil),
            ("cache base", base.path, baseSource),
            ("hf cache", downloader.defaultHubCache.path, hubCacheSource),
            ("spool", spoolExists ? spool : "\(spool) (not created yet)", nil),
            ("daemon", daemonLine(admin), nil),
            ("libcurl", speechProgram.libcurl(), nil),
            ("proxy", proxies.isEmpty ? "none set" : proxies.map { "\($0.0)=\($0.1)" }.joined(separator: " "), nil),
            ("kernel", release, nil),
            ("inotify", DirectoryWatcher.shared != nil
                ? "yes" + (spoolExists && !FilesystemKind.inotifySeesAllWriters(spool) ? " (the spool's filesystem hides other nodes' writes: polled)" : "")
                : "no instance (waiters sleep on the spool's futex wake word)", nil),
            ("file look-ups", hasGetxattrat ? "fstatat + getxattrat (Linux 6.13+)" : "fstatat + lgetxattr (getxattrat needs Linux 6.13)", nil),
            ("splicing", "FICLONERANGE where the filesystem shares blocks, else copy_file_range", nil),
            ("retries", "\(counted(downloader.settings.retry.attempts, "attempt"))",
             environment["SPEECH_FETCH_RETRY_ATTEMPTS"] != nil ? "SPEECH_FETCH_RETRY_ATTEMPTS" : "default"),
        ]
        if let value = environment["HF_HUB_ENABLE_HF_TRANSFER"] {
            rows.append(("hf_transfer", "no effect (ranges are built in)", "HF_HUB_ENABLE_HF_TRANSFER=\(value)"))
        }
        if parsed.flag("json") {
            var object: [String: Any] = [:]
            for (key, value, source) in rows {
                let name = key.replacingOccurrences(of: " ", with: "_").replacingOccurrences(of: "-", with: "_")
                object[name] = value
                if let source { object[name + "_source"] = source }
            }
            emitJSON(object)
        } else {
            let width = rows.map(\.0.count).max() ?? 0
            emit(rows.map { row in
                let shown = row.0 == "token" ? (row.2.map { "from \($0)" } ?? row.1) : row.1 + (row.2.map { " (\($0))" } ?? "")
                return row.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + shown + "\n"
            }.joined())
        }
        exit(0)
    }

    /// Who serves the base, as `speech status` sees it: this user's daemon, another user's (whose
    /// spool this user may not use), or none.
    static func daemonLine(_ admin: CacheAdmin) -> String {
        if admin.daemonServesBase { return "speech-fetchd serves this base" }
        if let other = admin.otherUsersDaemon {
            return "speech-fetchd running as \(other.user)\(other.pid.map { " (pid \($0))" } ?? "") serves this base; its spool is "
                + "\(other.user)'s, so downloads as \(Messages.accountName(geteuid())) are refused there: run them as \(other.user) (\(Messages.runAs(other.user)) speech …)"
        }
        return "none serves this base (downloads run in the calling process)"
    }
}
