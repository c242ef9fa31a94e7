// FetchdCommand - `speech-fetchd`'s command line: parsing, the log, and the supervisor or a
// worker. One function that both executables run, so that every process of a node (the callers,
// the supervisor, its workers) can run the same executable file and share its pages
// (docs/architecture.md, "Start-up").
import CFileOps
import Digest
import Daemon
import Foundation
import ModelCache

public enum FetchdCommand {
    /// The name the daemon's processes carry (ps, pgrep, logs).
    public static let name = "speech-fetchd"

    /// Set by the `speech-fetchd` executable to its own absolute path when it runs the `speech`
    /// beside it: `speech` then is the daemon, and starts its workers through that path.
    public static let environmentKey = "SPEECH_FETCH_AS_FETCHD"

    public static let usage = """
    usage: speech-fetchd --cache-base DIR [--workers N] [--slots K] [--node NAME] [--own-requests]

    Serves the spool of one cache base: splits requested files into range jobs, keeps N worker
    processes fetching them, K ranges at once each (default K 4, N enough for
    HF_DOWNLOAD_RANGE_CONCURRENCY ranges: 4 × 4 = 16), revokes dead claims,
    splices parts and finalizes files. Foreground; logs to stderr; SIGTERM or SIGINT drains.
    Every node's workers help with every request in the spool, unless --own-requests limits
    them to requests made on this node. --node (default: the host name) names this node in
    every claim; SPEECH_FETCH_LEASE_SECONDS (30) and SPEECH_FETCH_POLL_SECONDS (1, where inotify
    cannot see other nodes' writes) tune the cluster behaviour.
    """

    /// Runs the daemon (or, with `--worker`, one worker) and exits. `executable` is what the
    /// supervisor starts its workers with: the absolute path of the `speech-fetchd` executable.
    public static func run(arguments: [String], executable: String) -> Never {
        sf_set_process_name(name)  // run by `speech`, it would show as speech in ps and pgrep
        var args = arguments
        var base: String?
        var workers: Int?
        var node: String?
        var isWorker = false
        var ownRequests = false
        var slots = 4
        while !args.isEmpty {
            let arg = args.removeFirst()
            func value() -> String {
                guard !args.isEmpty else { fail("\(arg) needs a value\n\(usage)") }
                let value = args.removeFirst()
                guard !value.isEmpty else { fail("\(arg) needs a value, not an empty string") }
                return value
            }
            switch arg {
            case "--cache-base": base = value()
            case "--workers":
                guard let n = Int(value()), n > 0 else { fail("--workers needs a positive number") }
                workers = n
            case "--node": node = value()
            case "--worker": isWorker = true
            case "--own-requests": ownRequests = true
            case "--slots":
                guard let n = Int(value()), n > 0, n <= 64 else { fail("--slots needs a number from 1 to 64") }
                slots = n
            case "-h", "--help":
                print(usage)
                exit(0)
            default: fail("unknown argument \(arg)\n\(usage)")
            }
        }
        var environment = ProcessInfo.processInfo.environment
        if let node { environment["SPEECH_FETCH_NODE"] = node }
        let cacheBase = URL(fileURLWithPath: base ?? HuggingFaceDownloader(environment: environment).defaultCacheBase.path)
        let stop = StopSignal()
        stop.install()
        let role = isWorker ? "speech-fetchd[\(getpid())] worker" : "speech-fetchd[\(getpid())]"
        let log: @Sendable (String) -> Void = { line in
            let stamp = ISO8601DateFormatter().string(from: Date())
            FileHandle.standardError.write(Data("\(stamp) \(role): \(line)\n".utf8))
        }
        do {
            try CacheLocation.checkDirectory(cacheBase, role: "the cache base (--cache-base)", forWriting: true)
            try CryptoLibrary.load()  // every staging file hashes: without libcrypto, say so at start
            if isWorker {
                try Worker(cacheBase: cacheBase, environment: environment, slots: slots, ownRequestsOnly: ownRequests, log: log)
                    .run(shouldStop: { stop.isRaised })
            } else {
                let command = [executable, "--worker", "--cache-base", cacheBase.path] + (node.map { ["--node", $0] } ?? [])
                try Supervisor(cacheBase: cacheBase, workers: workers, slots: slots, workerCommand: command,
                               ownRequestsOnly: ownRequests, environment: environment, log: log)
                    .run(shouldStop: { stop.isRaised })
            }
            exit(0)
        } catch {
            fail("\(error)")
        }
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("speech-fetchd: \(message)\n".utf8))
        exit(64)
    }
}
