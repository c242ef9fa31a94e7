// FetchdProcess - one process of a node's daemon, the supervisor or one worker, run until it is
// told to stop. The executables parse the command line (CommandLineKit's FetchdCommandLine);
// both `speech-fetchd` and `speech` (run as speech-fetchd, docs/architecture.md "Start-up")
// call this, so every process of a node can run one executable file and share its pages. The
// size cap's pass is CacheAdmin's prune, which sits beside this module: the host hands it in
// (SpeechFetch's `FetchdProcess.run(_:executable:environment:)`, CacheCapPass.swift).
import ByteUnits
import CFileOps
import DaemonOptions
import Digest
import Foundation
import HubClient
import ModelCache
import SharedFiles
import Spool
import Transfer

public enum FetchdProcess {
    /// The name the daemon's processes carry (ps, pgrep, logs).
    public static let name = "speech-fetchd"

    /// Set by the `speech-fetchd` executable to its own absolute path when it runs the `speech`
    /// beside it: `speech` then is the daemon, and starts its workers through that path.
    public static let environmentKey = "SPEECH_FETCH_AS_FETCHD"

    /// Runs the supervisor (or one worker) until SIGTERM or SIGINT drains it, logging one line
    /// per event to stderr. `executable` is what the supervisor starts its workers with: the
    /// absolute path of the `speech-fetchd` executable. `cacheCap` makes the size cap's pass when
    /// `options.maxCacheSize` is set.
    /// - Throws: what stops it from serving (libcrypto missing, the spool unusable).
    public static func run(_ options: FetchdOptions, executable: String,
                           environment base: [String: String] = ProcessInfo.processInfo.environment,
                           cacheCap: CacheCap.Maker) throws {
        sf_set_process_name(name)  // run by `speech`, it would show as speech in ps and pgrep
        var environment = base
        if let node = options.node { environment["SPEECH_FETCH_NODE"] = node }
        // The supervisor's workers are started with this environment: they judge targets alike.
        if !options.hubCaches.isEmpty { environment[RequestTargets.hubCachesVariable] = options.hubCaches.joined(separator: ":") }
        // Spelled as a caller's HubEndpoint spells its HF_ENDPOINT, so that the two compare.
        let allowed = options.allowedEndpoints.compactMap { HubEndpoint($0)?.url }
        if !allowed.isEmpty { environment[EndpointPolicy.allowedVariable] = allowed.joined(separator: " ") }
        let cacheBase = options.cacheBase ?? CacheLocation.defaultBase(environment)
        let stop = StopSignal()
        stop.install()
        // Before anything is logged: every line goes to the file, which SIGHUP reopens.
        if let path = options.log { try LogFile.attach(path) } else { LogFile.ignoreHangups() }
        let role = options.isWorker ? "speech-fetchd[\(getpid())] worker" : "speech-fetchd[\(getpid())]"
        let log: @Sendable (String) -> Void = { line in
            let stamp = ISO8601DateFormatter().string(from: Date())
            // A line the log cannot take (a full disk, a closed pipe) is dropped, never a crash.
            StandardError.write("\(stamp) \(role): \(line)\n")
        }
        RetryEvents.watch { event in
            log("\(event.subject): \(event.reason); retrying, attempt \(event.attempt) of \(event.attempts) in \(String(format: "%.1f", event.wait)) s")
        }
        try CacheLocation.checkDirectory(cacheBase, role: "the cache base (--cache-base)", forWriting: true)
        try CryptoLibrary.load()  // every staging file hashes: without libcrypto, say so at start
        if options.isWorker {
            try Worker(cacheBase: cacheBase, environment: environment, slots: options.slots,
                       ownRequestsOnly: options.ownRequestsOnly, log: log)
                .run(shouldStop: { stop.isRaised })
        } else {
            let command = [executable, "--worker", "--cache-base", cacheBase.path] + (options.node.map { ["--node", $0] } ?? [])
                + (options.log.map { ["--log", $0] } ?? [])
            // The node's cap: one schedule in RAM that every worker charges (RateCap).
            var schedule: String?
            if let rate = options.maxRate {
                let path = try RateCap.makeSchedule(name: "speech-fetchd-rate-\(getuid())-\(getpid())",
                                                    fallback: FileManager.default.temporaryDirectory.path)
                environment["SPEECH_FETCH_NODE_MAX_RATE"] = "\(rate)"
                environment["SPEECH_FETCH_NODE_RATE_FILE"] = path
                schedule = path
                log("capping the node's downloads at \(ByteFormat.rate(rate)) (all workers together)")
            }
            defer { if let schedule { unlink(schedule) } }
            let supervisor = try Supervisor(cacheBase: cacheBase, workers: options.workers, slots: options.slots, workerCommand: command,
                                            ownRequestsOnly: options.ownRequestsOnly, environment: environment, log: log)
            if let path = options.log {
                // The workers inherited the old file: each reopens it too (they run with --log).
                supervisor.hangups = HangupRelay(count: { LogFile.hangups }, reopened: {
                    let failed = LogFile.lastFailure
                    log(failed == 0 ? "reopened the log \(path) (SIGHUP); the workers reopen it too"
                        : "cannot reopen the log \(path) (\(String(cString: strerror(failed)))); still writing to the old file")
                })
            }
            var server: MetricsServer?
            if let endpoint = options.metrics {
                guard let address = MetricsAddress(host: endpoint.host, port: endpoint.port) else {
                    throw MetricsServerError(address: "\(endpoint.host):\(endpoint.port)", operation: "use", errno: EINVAL)
                }
                let metrics = DaemonMetrics(cacheBase: cacheBase, build: options.build, environment: environment)
                server = try MetricsServer(address: address, page: { metrics.page() })
                supervisor.metrics = metrics
                server?.start()
                log("serving metrics at http://\(address)/metrics")
            }
            defer { server?.stop() }
            if let size = options.maxCacheSize {
                supervisor.cacheCap = cacheCap(cacheBase, size, options.cacheGrace, options.capHubCache, environment, log)
            }
            try supervisor.run(shouldStop: { stop.isRaised })
        }
    }
}
