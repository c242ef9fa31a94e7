// DownloadError - failures of a whole download call that are neither the Hub's nor the cache's own.
import Foundation

public enum DownloadError: Error, Sendable, CustomStringConvertible {
    /// The Hub could not be reached and the cache cannot satisfy the call.
    case hubUnreachable(repo: String, directory: String, missing: [String], cause: String)
    case conflictingDirectories
    /// The daemon could not fetch the request (404, gated, checksum mismatch after retries…).
    case requestFailed(repo: String, reason: String)
    case timedOut(repo: String)
    /// A request waits in the spool but no speech-fetchd has served the base for a lease.
    case noDaemon(repo: String, spool: String)
    /// `--detach` started speech-fetchd but it never came up.
    case daemonDidNotStart(log: String)
    /// No progress for `seconds` (the seed's stall guard, `withDownloadStallGuard`): the attempt
    /// was stopped, keeping what it staged.
    case stalled(modelId: String, seconds: Int)
    /// speech-fetchd is needed (`backgroundTransfer` is set) and none could be found.
    case noDaemonExecutable(searched: [String])

    public var description: String {
        switch self {
        case .hubUnreachable(let repo, let directory, let missing, let cause):
            let list = missing.prefix(10).joined(separator: ", ") + (missing.count > 10 ? ", … (\(missing.count) in all)" : "")
            return "the Hub could not be reached (\(cause)) and \(repo) is not complete in \(directory); missing: \(list)"
        case .requestFailed(let repo, let reason):
            return "the download of \(repo) failed: \(reason)"
        case .noDaemon(let repo, let spool):
            return "\(repo) is requested in \(spool) but no speech-fetchd serves it; start `speech-fetchd --cache-base …` or run `speech download \(repo)` to fetch it in this process"
        case .stalled(let modelId, let seconds):
            return "the download of \(modelId) made no progress for \(seconds) s and was stopped; what it staged is kept for the next attempt"
        case .noDaemonExecutable(let searched):
            return "backgroundTransfer is set but no speech-fetchd was found (looked at \(searched.joined(separator: ", "))); install it beside this program or set SPEECH_FETCHD to its path"
        case .daemonDidNotStart(let log):
            return "speech-fetchd did not start; see \(log)"
        case .timedOut(let repo):
            return "timed out waiting for \(repo); the transfer goes on"
        case .conflictingDirectories:
            return "give either cacheDir (the model's own directory) or cacheBaseDir (a base for models/<org>/<name>) and huggingFaceCache (--hf-cache), not cacheDir with either"
        }
    }
}
