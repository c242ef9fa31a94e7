// FetchdCommandLine - speech-fetchd's command line, shared by the two executables that can be
// the daemon (speech-fetchd, and speech when speech-fetchd runs it: docs/architecture.md).
import ByteUnits
import DaemonOptions
import Foundation

public enum FetchdCommandLine {
    public static let spec = CommandSpec(
        name: "speech-fetchd",
        summary: """
        Serves the spool of one cache base: splits requested files into range jobs, keeps N worker
        processes fetching them, K ranges at once each (default K 4, N enough for
        HF_DOWNLOAD_RANGE_CONCURRENCY ranges: 4 × 4 = 16), revokes dead claims, splices parts
        and finalizes files. Foreground; logs one line per event to stderr (or --log FILE, which
        SIGHUP reopens; without it SIGHUP is ignored); SIGTERM or SIGINT drains (workers give
        their ranges back) and exits 0.
        """,
        options: [
            .value("cache-base", "DIR", "the cache base to serve (default: $QWEN3_CACHE_DIR or ~/.cache/qwen3-speech)"),
            .value("workers", "N", "worker processes, 1 to \(maxWorkers) (default: enough for HF_DOWNLOAD_RANGE_CONCURRENCY)"),
            .value("slots", "K", "ranges in flight per worker, 1 to 64 (default 4)"),
            .value("node", "NAME", "this node's name in every claim (default: SPEECH_FETCH_NODE or the host name)"),
            .flag("own-requests", "serve only requests made on this node"),
            .value("hf-cache", "DIR", "also write requests into this huggingface_hub cache (repeatable; the cache base is always served)"),
            .value("allow-endpoint", "URL", "also fetch requests that callers resolved against this Hub or mirror (repeatable; without a token); its own HF_ENDPOINT is always served, and a request from any other Hub fails"),
            .flag("worker", "run one worker process (the supervisor starts these)"),
            .value("max-rate", "RATE", "cap the node's download rate, all workers together: 20M, 500K (1024-based) or bytes per second"),
            .value("max-cache-size", "SIZE", "keep the cache base's models within SIZE (20G, 500M): evict the least recently used after each finished request and every 10 minutes"),
            .value("cap-hf-cache", "DIR", "with --max-cache-size: count this huggingface_hub cache's revisions too, and evict them alike"),
            .value("cache-grace", "HOURS", "with --max-cache-size: never evict a model used within HOURS, and delete evicted ones after HOURS (default 1)"),
            .value("metrics", "ADDR:PORT", "serve Prometheus metrics at http://ADDR:PORT/metrics (a bare PORT listens on 127.0.0.1)"),
            .value("log", "FILE", "append stdout and stderr to FILE, reopened on SIGHUP (logrotate); default: as given"),
        ],
        epilogue: """
        environment: SPEECH_FETCH_LEASE_SECONDS (30), SPEECH_FETCH_POLL_SECONDS (1, where inotify
        cannot see other nodes' writes), SPEECH_FETCH_PRUNE_SECONDS (600, the size cap's timer),
        the HF_DOWNLOAD_* and SPEECH_FETCH_RETRY_* settings.
        exit codes: 0 drained after SIGTERM/SIGINT, 1 cannot serve (reason logged), 64 bad usage.
        """)

    /// The most worker processes `--workers` takes: each is a process with its own connections,
    /// and 256 × 64 slots is far more ranges at once than any link needs.
    public static let maxWorkers = 256

    /// `speech_fetchd_build_info`'s labels: what `--version` prints.
    public static func buildLabels(_ program: Program) -> [(String, String)] {
        [("version", BuildInfo.version), ("commit", BuildInfo.commit ?? "unknown"), ("libcurl", program.libcurl())]
    }

    /// `9464`, `127.0.0.1:9464`, `0.0.0.0:9464` or `[::1]:9464` as a numeric host and a port;
    /// nil for anything else. `localhost` is 127.0.0.1.
    public static func listenAddress(_ text: String) -> (host: String, port: UInt16)? {
        var host = "127.0.0.1"
        var portText = Substring(text)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
            var probe = in6_addr()
            guard inet_pton(AF_INET6, host, &probe) == 1 else { return nil }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon] == "localhost" ? "127.0.0.1" : String(text[..<colon])
            portText = text[text.index(after: colon)...]
            var probe = in_addr()
            guard inet_pton(AF_INET, host, &probe) == 1 else { return nil }
        }
        guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let port = UInt16(portText), port > 0 else { return nil }
        return (host, port)
    }

    /// Parses the daemon's command line; help, version and usage errors end the process.
    /// `program` is speech-fetchd as the executable made it (with its libcurl line).
    /// The daemon's options from its command line: the one place they are made (both executables
    /// that can be the daemon parse here); help, version and usage errors end the process.
    public static func parse(_ words: [String], as program: Program) -> FetchdOptions {
        let parsed = program.parse(spec, words)
        var result = FetchdOptions()
        result.cacheBase = parsed.value("cache-base").map { URL(fileURLWithPath: $0) }
        if let raw = parsed.value("workers") {
            guard let n = Int(raw), n > 0, n <= maxWorkers else {
                program.usageError("speech-fetchd: --workers needs a number from 1 to \(maxWorkers), not '\(raw)' (each worker is a process with --slots ranges in flight: raise --slots, up to 64, for more ranges at once)")
            }
            result.workers = n
        }
        if let raw = parsed.value("slots") {
            guard let n = Int(raw), n > 0, n <= 64 else { program.usageError("speech-fetchd: --slots needs a number from 1 to 64, not '\(raw)'") }
            result.slots = n
        }
        result.node = parsed.value("node")
        result.isWorker = parsed.flag("worker")
        result.ownRequestsOnly = parsed.flag("own-requests")
        result.hubCaches = parsed.values("hf-cache").map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        for raw in parsed.values("allow-endpoint") {
            var text = raw.trimmingCharacters(in: .whitespaces)
            while text.hasSuffix("/") { text.removeLast() }
            guard let parts = URLComponents(string: text), ["http", "https"].contains(parts.scheme?.lowercased() ?? ""),
                  !(parts.host ?? "").isEmpty, parts.query == nil, parts.fragment == nil, parts.user == nil, !text.contains(" ") else {
                program.usageError("speech-fetchd: --allow-endpoint needs a Hub's URL as HF_ENDPOINT gives it, like https://hf-mirror.com or http://10.0.0.5:8080; not '\(raw)'")
            }
            result.allowedEndpoints.append(text)
        }
        if let raw = parsed.value("max-rate") {
            guard let rate = ByteRate.parse(raw), rate >= 1024 else {
                program.usageError("speech-fetchd: --max-rate needs bytes per second of at least 1K: a number with K, M or G (1024-based, as curl's --limit-rate), like 500K or 20M, or plain bytes like 65536; not '\(raw)'")
            }
            result.maxRate = rate
        }
        result.log = parsed.value("log")
        if let raw = parsed.value("max-cache-size") {
            guard let size = ByteRate.parse(raw) else {
                program.usageError("speech-fetchd: --max-cache-size needs a size: a number with K, M or G (1024-based), like 500M or 20G, or plain bytes; not '\(raw)'")
            }
            result.maxCacheSize = size
        }
        if let raw = parsed.value("cache-grace") {
            guard result.maxCacheSize != nil else { program.usageError("speech-fetchd: --cache-grace goes with --max-cache-size SIZE") }
            guard let hours = Double(raw.trimmingCharacters(in: .whitespaces)), hours >= 0, hours.isFinite else {
                program.usageError("speech-fetchd: --cache-grace takes a number of hours, e.g. --cache-grace 2; not '\(raw)'")
            }
            result.cacheGrace = hours * 3600
        }
        if let raw = parsed.value("cap-hf-cache") {
            guard result.maxCacheSize != nil else { program.usageError("speech-fetchd: --cap-hf-cache goes with --max-cache-size SIZE") }
            result.capHubCache = URL(fileURLWithPath: raw)
        }
        if let raw = parsed.value("metrics") {
            guard let address = listenAddress(raw) else {
                program.usageError("speech-fetchd: --metrics needs ADDR:PORT with a numeric address, as 127.0.0.1:9464, [::1]:9464 or 0.0.0.0:9464 (every interface), or a bare port for loopback; not '\(raw)'")
            }
            result.metrics = address
        }
        return result
    }

    /// Runs the daemon with the parsed arguments, then exits 0 (it drained); an error it throws
    /// ends the process as speech-fetchd's failure. Both executables that can be the daemon end here.
    /// With `--metrics`, the options get the build's labels first (here, not in `parse`: asking
    /// libcurl's version loads it, and speech-fetchd parses before it runs the `speech` beside it).
    public static func serve(_ options: FetchdOptions, as program: Program, _ daemon: (FetchdOptions) throws -> Void) -> Never {
        var options = options
        if options.metrics != nil { options.build = buildLabels(program) }
        do {
            try daemon(options)
            exit(ExitCode.success)
        } catch {
            program.fail("\(error)")
        }
    }
}
