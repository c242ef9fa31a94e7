// ResolveCommand - `speech resolve`: the commit a revision names and the file tree, no file bodies.
import CommandLineKit
import Foundation
import HubClient
import HubTypes
import SpeechFetch

enum ResolveCommand {
    static let spec = CommandSpec(
        name: "speech resolve", operands: "<org/name>",
        summary: "Print the commit a revision names and the file tree the Hub lists (no file bodies).",
        options: [.value("revision", "R", "branch, tag or commit (default main)"), .flag("json", "one JSON object")],
        minOperands: 1, maxOperands: 1,
        epilogue: "Honours HF_ENDPOINT, HF_TOKEN and the SPEECH_FETCH_RETRY_* settings as `speech download` does.")

    static func run(_ words: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> Never {
        let parsed = speechProgram.parse(spec, words)
        let repo: RepoID
        do { repo = try RepoID(parsed.operands[0]) } catch { speechProgram.usageError("speech resolve: \(error)", help: spec.name) }
        if let warning = HubEndpoint.ignoredValueWarning(environment) { speechProgram.warn(warning) }
        RetryEvents.watch { event in write("speech: \(Messages.retryLine(event))\n", to: STDERR_FILENO) }
        do {
            // The downloader's client: HF_ENDPOINT, HF_TOKEN, SPEECH_FETCH_RETRY_*, the stall guard.
            let client = HuggingFaceDownloader(environment: environment).client
            let snapshot = try client.snapshot(of: repo, revision: parsed.value("revision") ?? "main")
            if parsed.flag("json") {
                emitJSON(["repo": repo.description, "revision": snapshot.revision, "commit": snapshot.commit, "endpoint": client.endpoint.url,
                          "files": snapshot.files.map { file -> [String: Any] in
                              var o: [String: Any] = ["path": file.path, "size": file.size, "lfs": file.isLFS]
                              if let sha = file.sha256 { o["sha256"] = sha }
                              return o
                          }] as [String: Any])
                exit(0)
            }
            emit("\(repo) @ \(snapshot.commit) (\(client.endpoint))\n")
            for file in snapshot.files {
                // A name's control characters are shown escaped, never sent to the terminal (TerminalText).
                emit(String(format: "%12lld  %@  ", file.size, file.isLFS ? "lfs" : "git") + TerminalText.escaped(file.path) + "\n")
            }
            exit(0)
        } catch {
            speechProgram.fail(Messages.describe(error, environment: environment))
        }
    }
}
