// EnvCommand - `speech env`: what speech would use on this machine, for bug reports and setup.
import CacheAdmin
import CommandLineKit
import FileEvents
import Foundation
import HubClient
import SpeechFetch

enum EnvCommand {
    static func run(_ words: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Never {
        let parsed = speechProgram.parse(InfoCommands.envSpec, words)
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
        let rows: [(String, String)] = [
            ("endpoint", "\(HubEndpoint.fromEnvironment(environment).url) (\(endpointSource))"),
            ("token", HubToken.source(environment).map { "from \($0)" } ?? "none (public repos only)"),
            ("offline", downloader.offlineByDefault ? "yes (HF_HUB_OFFLINE)" : "no"),
            ("cache base", "\(base.path) (\(baseSource))"),
            ("spool", spoolExists ? spool : "\(spool) (not created yet)"),
            ("daemon", admin.daemonServesBase ? "speech-fetchd serves this base" : "none serves this base (downloads run in the calling process)"),
            ("libcurl", BuildInfo.libcurl),
            ("proxy", proxies.isEmpty ? "none set" : proxies.map { "\($0.0)=\($0.1)" }.joined(separator: " ")),
            ("kernel", release),
            ("inotify", DirectoryWatcher.shared != nil
                ? "yes" + (spoolExists && !FilesystemKind.inotifySeesAllWriters(spool) ? " (the spool's filesystem hides other nodes' writes: polled)" : "")
                : "no instance (waiters sleep on the spool's futex wake word)"),
            ("file look-ups", hasGetxattrat ? "fstatat + getxattrat (Linux 6.13+)" : "fstatat + lgetxattr (getxattrat needs Linux 6.13)"),
            ("splicing", "FICLONERANGE where the filesystem shares blocks, else copy_file_range"),
            ("retries", "\(downloader.settings.retry.attempts) attempts (SPEECH_FETCH_RETRY_ATTEMPTS)"),
        ]
        if parsed.flag("json") {
            var object: [String: Any] = [:]
            for (key, value) in rows { object[key.replacingOccurrences(of: " ", with: "_")] = value }
            emitJSON(object)
        } else {
            let width = rows.map(\.0.count).max() ?? 0
            emit(rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 + "\n" }.joined())
        }
        exit(0)
    }
}
