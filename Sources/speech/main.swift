// speech - the command-line front of speech-fetch: parsing and printing only.
import CommandLineKit
import Curl
import Daemon
import Foundation
import SpeechFetch

let speechProgram = Program("speech", libcurl: CurlLibrary.versionOrReason)

let speechSpec = CommandSpec(
    name: "speech", operands: "<command> [options]",
    summary: """
    Download speech models from the Hugging Face Hub into a shared cache, with a per-node daemon.

    commands:
      download <org/name | model> [FILE]...   download a repo or a catalog model, with progress
      models                                  the model catalog and what of it is cached
      wait <org/name>                         block until a daemon-served request is ready
      status                                  the spool: daemons, workers, requests
      cancel <org/name>                       withdraw a repo's request from speech-fetchd (staged bytes kept)
      stop                                    stop this node's speech-fetchd (one --detach started)
      resolve <org/name>                      the commit and the file tree, no file bodies
      cache \(CacheCommand.commandNames.joined(separator: " | "))
                                              manage the cache
      env                                     what speech would use here (endpoint, cache, daemon, kernel)
      demo                                    a local test Hub and a demo download
      help [command]                          this text, or a command's
    `speech <command> --help` describes each command.
    """,
    minOperands: 0, maxOperands: nil,
    epilogue: """
    environment: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HUB_DISABLE_PROGRESS_BARS, QWEN3_CACHE_DIR,
      HF_DOWNLOAD_RANGE_THRESHOLD, HF_DOWNLOAD_RANGE_CHUNK, HF_DOWNLOAD_RANGE_CONCURRENCY,
      HF_DOWNLOAD_STALL_TIMEOUT, SPEECH_FETCH_RETRY_ATTEMPTS, SPEECH_FETCH_RETRY_DELAYS
      (docs/cache-and-offline.md)
    exit codes: 0 done, 1 operation failed, 2 wait timed out, 64 bad usage, 130 interrupted.
    """)

// Run by the speech-fetchd executable (docs/architecture.md, "Start-up"): be the daemon. The
// variable holds that executable's absolute path, which the workers are started with.
if let fetchd = ProcessInfo.processInfo.environment[FetchdProcess.environmentKey], fetchd.hasPrefix("/") {
    unsetenv(FetchdProcess.environmentKey)  // not inherited by anything the daemon starts
    let fetchdProgram = Program("speech-fetchd", libcurl: CurlLibrary.versionOrReason)
    FetchdCommandLine.serve(FetchdCommandLine.parse(Array(CommandLine.arguments.dropFirst()), as: fetchdProgram), as: fetchdProgram) { parsed in
        try FetchdProcess.run(FetchdOptions(cacheBase: parsed.cacheBase.map { URL(fileURLWithPath: $0) }, workers: parsed.workers, slots: parsed.slots,
                                            node: parsed.node, isWorker: parsed.isWorker, ownRequestsOnly: parsed.ownRequests, hubCaches: parsed.hubCaches,
                                            allowedEndpoints: parsed.allowedEndpoints,
                                            metrics: parsed.metrics, maxRate: parsed.maxRate, maxCacheSize: parsed.maxCacheSize, cacheGrace: parsed.cacheGrace,
                                            capHubCache: parsed.capHubCache.map { URL(fileURLWithPath: $0) }, log: parsed.log, build: parsed.metrics == nil ? [] : FetchdCommandLine.buildLabels(fetchdProgram)), executable: fetchd)
    }
}

let commands: [String: ([String]) -> Never] = [
    "download": { DownloadCommand.run($0) },
    "cache": { CacheCommand.run($0) },
    "models": { ModelsCommand.run($0) },
    "wait": { WaitCommand.run($0) },
    "status": { StatusCommand.run($0) },
    "cancel": { CancelCommand.run($0) },
    "stop": { StopCommand.run($0) },
    "resolve": { ResolveCommand.run($0) },
    "env": { EnvCommand.run($0) },
    "demo": { DemoCommand.run($0) },
]

let helpOf: [String: String] = [
    "download": DownloadCommand.spec.help, "cache": CacheCommand.spec.help, "models": ModelsCommand.spec.help,
    "wait": WaitCommand.spec.help, "cancel": CancelCommand.spec.help, "status": StatusCommand.spec.help, "stop": StopCommand.spec.help, "resolve": ResolveCommand.spec.help,
    "env": EnvCommand.spec.help, "demo": DemoCommand.spec.help,
]

var argv = Array(CommandLine.arguments.dropFirst())
guard let first = argv.first else {
    write(speechSpec.help, to: STDERR_FILENO)
    exit(ExitCode.usage)
}
if first.hasPrefix("-") {
    // Only -h/--help and --version come before a command.
    _ = speechProgram.parse(speechSpec, [first])
    speechProgram.usageError("speech: a command comes first, e.g. speech download kokoro")
}
argv.removeFirst()
if first == "help" {
    guard let topic = argv.first else { emit(speechSpec.help); exit(0) }
    guard argv.count == 1, let text = helpOf[topic] else { speechProgram.usageError("speech help: unknown command '\(argv.joined(separator: " "))'") }
    emit(text)
    exit(0)
}
guard let command = commands[first] else {
    speechProgram.usageError("speech: unknown command '\(first)' (download, models, wait, status, cancel, stop, resolve, cache, env, demo)")
}
command(argv)
