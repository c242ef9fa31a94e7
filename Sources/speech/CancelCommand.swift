// CancelCommand - `speech cancel`: withdraw a repo's requests from speech-fetchd, staged bytes kept.
import CommandLineKit
import Foundation
import HubTypes
import SpeechFetch

enum CancelCommand {
    static let spec = CommandSpec(
        name: "speech cancel", operands: "<org/name>",
        summary: """
        Withdraw the repo's requests from speech-fetchd. Waiters (`speech download`, `speech wait`) see
        "cancelled" and exit 1; the bytes already fetched stay staged, so a later download resumes.
        """,
        options: [CacheCommand.baseOption], minOperands: 1, maxOperands: 1,
        epilogue: "exit codes: 0 withdrawn, 1 nothing was requested for the repo, 64 bad usage.")

    static func run(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(spec, words)
        let repo = parsed.operands[0]
        do { _ = try RepoID(repo) } catch { speechProgram.usageError("speech cancel: \(error)", help: spec.name) }
        let base = parsed.value("cache-base")
        do {
            let withdrawn = try HuggingFaceDownloader().cancel(repo: repo, cacheBaseDir: base.map { URL(fileURLWithPath: $0) })
            guard !withdrawn.isEmpty else { speechProgram.fail("nothing is requested for \(repo) in this cache base; nothing to cancel") }
            for request in withdrawn {
                emit("cancelled \(request.repo) (request \(request.id)): \(request.unfinished.count) unfinished files keep their staged bytes "
                     + "in \(request.modelDir)/.incomplete\n")
            }
            exit(0)
        } catch {
            speechProgram.fail(Messages.describe(error))
        }
    }
}
