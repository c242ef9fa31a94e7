// DownloadError - failures of a whole download call that are neither the Hub's, the cache's nor
// the daemon's own (HandoffError).
import Foundation
import Spool

public enum DownloadError: Error, Sendable, CustomStringConvertible {
    /// The Hub could not be reached and the cache cannot satisfy the call.
    case hubUnreachable(repo: String, directory: String, missing: MissingFiles, cause: String)
    case conflictingDirectories
    /// No progress for `seconds` (the seed's stall guard, `withDownloadStallGuard`): the attempt
    /// was stopped, keeping what it staged.
    case stalled(modelId: String, seconds: Int)
    /// speech-fetchd is needed (`backgroundTransfer` is set) and none could be found.
    case noDaemonExecutable(searched: [String])
    /// `forceDownload` asks the Hub again, which offline mode forbids.
    case forceDownloadOffline(repo: String)
    /// The cache base is served by a speech-fetchd of another user, whose spool this process may
    /// not use: fetching into the base here would leave files and folders that user (the service)
    /// may not be able to write. Nothing was written; run the call as that user.
    case servedByAnotherUser(repo: String, base: String, user: String, pid: Int32?)

    public var description: String {
        switch self {
        case .hubUnreachable(let repo, let directory, let missing, let cause):
            return "the Hub could not be reached (\(cause)) and \(repo) is not complete in \(directory); \(missing.listed); "
                + "check the network and the endpoint (HF_ENDPOINT), or use only what is cached (offlineMode, HF_HUB_OFFLINE=1)"
        case .stalled(let modelId, let seconds):
            return "the download of \(modelId) made no progress for \(seconds) s and was stopped; what it staged is kept for the next attempt"
        case .noDaemonExecutable(let searched):
            return "backgroundTransfer is set but no speech-fetchd was found (looked at \(searched.joined(separator: ", "))); install it beside this program or set SPEECH_FETCHD to its path"
        case .forceDownloadOffline(let repo):
            return "forceDownload fetches \(repo) again from the Hub, which offline mode (offlineMode, HF_HUB_OFFLINE) forbids; drop one of them"
        case .servedByAnotherUser(let repo, let base, let user, let pid):
            return "\(base) is served by a speech-fetchd running as \(user)\(pid.map { " (pid \($0))" } ?? ""), whose spool this process "
                + "(\(SpoolTrust.accountName(geteuid()))) may not use, and fetching \(repo) here would leave folders that \(user) cannot write; "
                + "nothing was written: run the call as \(user) (sudo -u \(user) …), or give a --cache-dir / cacheDir of your own"
        case .conflictingDirectories:
            return "give either cacheDir (the model's own directory) or cacheBaseDir (a base for models/<org>/<name>) and huggingFaceCache (--hf-cache), not cacheDir with either"
        }
    }
}
