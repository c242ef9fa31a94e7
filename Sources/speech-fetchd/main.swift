// speech-fetchd - the per-node supervisor of the worker pool over a cache base's spool.
//
// It runs the `speech` installed beside it (of the same build) as the daemon, so that the
// callers, the supervisor and its workers all run one executable file and share its pages
// instead of each binary's pages being counted against its own processes (docs/architecture.md,
// "Start-up"). Without a `speech` beside it, or when that cannot be run, it runs the daemon
// itself: the same code (Daemon's FetchdProcess, run with SpeechFetch's size cap).
import CommandLineKit
import Curl
import Daemon
import Foundation
import SpeechFetch

let program = Program("speech-fetchd", libcurl: CurlLibrary.versionOrReason)
let words = Array(CommandLine.arguments.dropFirst())
let options = FetchdCommandLine.parse(words, as: program)  // help, version and usage errors end here
let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    ?? URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
let speech = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("speech").path
if access(speech, X_OK) == 0 {
    setenv(FetchdProcess.environmentKey, me, 1)
    var argv = ([me] + words).map { strdup($0) } + [nil]
    execv(speech, &argv)
    let reason = String(cString: strerror(errno))
    unsetenv(FetchdProcess.environmentKey)
    program.warn("cannot run \(speech) (\(reason)); running the daemon in this process")
}
FetchdCommandLine.serve(options, as: program) { try FetchdProcess.run($0, executable: me) }
