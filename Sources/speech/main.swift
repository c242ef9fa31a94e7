// speech - the command-line front of speech-fetch: parsing and printing only.
import CommandLineKit
import Curl
import Daemon
import Foundation
import SpeechFetch

let speechProgram = Program("speech", libcurl: CurlLibrary.versionOrReason)

/// One subcommand: its name, what follows it and what it does (for `speech --help`), its help
/// (`speech help <command>`) and its entry point. The one list of speech's commands.
struct Subcommand {
    let name: String
    let operands: String
    let summary: String
    let help: () -> String
    let run: ([String]) -> Never
}

let subcommands: [Subcommand] = [
    Subcommand(name: "download", operands: "<org/name | model> [FILE]...", summary: "download a repo or a catalog model, with progress",
               help: { DownloadCommand.spec.help }, run: { DownloadCommand.run($0) }),
    Subcommand(name: "models", operands: "", summary: "the model catalog and what of it is cached",
               help: { ModelsCommand.spec.help }, run: { ModelsCommand.run($0) }),
    Subcommand(name: "wait", operands: "<org/name>", summary: "block until a daemon-served request is ready",
               help: { WaitCommand.spec.help }, run: { WaitCommand.run($0) }),
    Subcommand(name: "status", operands: "", summary: "the spool: daemons, workers, requests",
               help: { StatusCommand.spec.help }, run: { StatusCommand.run($0) }),
    Subcommand(name: "cancel", operands: "<org/name>", summary: "withdraw a repo's request from speech-fetchd (staged bytes kept)",
               help: { CancelCommand.spec.help }, run: { CancelCommand.run($0) }),
    Subcommand(name: "stop", operands: "", summary: "stop this node's speech-fetchd (one --detach started)",
               help: { StopCommand.spec.help }, run: { StopCommand.run($0) }),
    Subcommand(name: "resolve", operands: "<org/name>", summary: "the commit and the file tree, no file bodies",
               help: { ResolveCommand.spec.help }, run: { ResolveCommand.run($0) }),
    Subcommand(name: "cache", operands: CacheCommand.commandNames.joined(separator: " | "), summary: "manage the cache",
               help: { CacheCommand.spec.help }, run: { CacheCommand.run($0) }),
    Subcommand(name: "env", operands: "", summary: "what speech would use here (endpoint, cache, daemon, kernel)",
               help: { EnvCommand.spec.help }, run: { EnvCommand.run($0) }),
    Subcommand(name: "demo", operands: "", summary: "a local test Hub and a demo download",
               help: { DemoCommand.spec.help }, run: { DemoCommand.run($0) }),
]

/// `  name operands   summary`, the summary at column 43 (on the next line when they reach it).
func commandLine(_ usage: String, _ summary: String) -> String {
    let width = 40
    return usage.count < width ? "  " + usage.padding(toLength: width, withPad: " ", startingAt: 0) + summary
                               : "  " + usage + "\n" + String(repeating: " ", count: width + 2) + summary
}

let speechSpec = CommandSpec(
    name: "speech", operands: "<command> [options]",
    summary: """
    Download speech models from the Hugging Face Hub into a shared cache, with a per-node daemon.

    commands:
    \((subcommands.map { commandLine($0.operands.isEmpty ? $0.name : $0.name + " " + $0.operands, $0.summary) }
        + [commandLine("help [command]", "this text, or a command's")]).joined(separator: "\n"))
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
    FetchdCommandLine.serve(FetchdCommandLine.parse(Array(CommandLine.arguments.dropFirst()), as: fetchdProgram), as: fetchdProgram) {
        try FetchdProcess.run($0, executable: fetchd)
    }
}

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
    guard argv.count == 1, let command = subcommands.first(where: { $0.name == topic }) else {
        speechProgram.usageError("speech help: unknown command '\(argv.joined(separator: " "))'")
    }
    emit(command.help())
    exit(0)
}
guard let command = subcommands.first(where: { $0.name == first }) else {
    speechProgram.usageError("speech: unknown command '\(first)' (\(subcommands.map(\.name).joined(separator: ", ")))")
}
command.run(argv)
