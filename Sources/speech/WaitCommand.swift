// WaitCommand - `speech wait`: block until a daemon-served request is final, failed or timed out.
import CommandLineKit
import Daemon
import Foundation
import HubTypes
import SpeechFetch

enum WaitCommand {
    static let spec = CommandSpec(
        name: "speech wait", operands: "<org/name>",
        summary: "Block until the repo's requested files are final (exit 0), its request failed (1), or the timeout passes (2).",
        options: [CacheCommand.baseOption, .value("timeout", "S", "give up after S seconds (exit 2; the transfer goes on)")],
        minOperands: 1, maxOperands: 1,
        epilogue: "exit codes: 0 ready, 1 failed or cancelled (reason printed), 2 timeout, 64 bad usage, 130 interrupted.")

    static func run(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(spec, words)
        let repo = parsed.operands[0]
        do { _ = try RepoID(repo) } catch { speechProgram.usageError("speech wait: \(error)", help: spec.name) }
        var timeout: Double?
        if let raw = parsed.value("timeout") {
            guard let value = Double(raw), value >= 0, value.isFinite else {
                speechProgram.usageError("speech wait: --timeout takes seconds, e.g. --timeout 60, not '\(raw)'", help: spec.name)
            }
            timeout = value
        }
        let interrupt = StopSignal()
        interrupt.install()
        let base = parsed.value("cache-base")
        do {
            let directory = try HuggingFaceDownloader().wait(
                repo: repo, cacheBaseDir: base.map { URL(fileURLWithPath: $0) },
                timeout: timeout, isCancelled: { interrupt.isRaised })
            emit("\(repo): ready in \(directory)\n")
            exit(0)
        } catch is CancellationError {
            speechProgram.fail("stopped waiting; the transfer goes on", code: ExitCode.interrupted)
        } catch HandoffError.timedOut {
            speechProgram.fail("timed out waiting for \(repo); the transfer goes on", code: ExitCode.timeout)
        } catch {
            speechProgram.fail(Messages.describe(error, baseArgument: base.map { " --cache-base \(shellQuoted($0))" } ?? ""))
        }
    }
}
