// speech-fetchd - the per-node supervisor of the worker pool over a cache base's spool.
//
// It runs the `speech` installed beside it, as `speech-fetchd` (argv[0]), so that the callers,
// the supervisor and its workers all run one executable file and share its pages instead of
// each binary's pages being counted against its own processes (docs/architecture.md,
// "Start-up"). Without a `speech` beside it, it runs the daemon itself: the same code
// (SpeechFetch.FetchdCommand).
import Foundation
import SpeechFetch

let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    ?? URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
let speech = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("speech").path
if access(speech, X_OK) == 0 {
    let argv = [me] + CommandLine.arguments.dropFirst()
    var cArgs = argv.map { strdup($0) } + [nil]
    execv(speech, &cArgs)  // returns only when it failed: run the daemon here instead
}
FetchdCommand.run(arguments: Array(CommandLine.arguments.dropFirst()), executable: me)
