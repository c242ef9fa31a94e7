// DownloadError - failures of a whole download call that are neither the Hub's nor the cache's own.
import Foundation

public enum DownloadError: Error, Sendable, CustomStringConvertible {
    /// The Hub could not be reached and the cache cannot satisfy the call.
    case hubUnreachable(repo: String, directory: String, missing: [String], cause: String)
    case conflictingDirectories
    /// The daemon could not fetch the request (404, gated, checksum mismatch after retries…).
    case requestFailed(repo: String, reason: String)
    case timedOut(repo: String)

    public var description: String {
        switch self {
        case .hubUnreachable(let repo, let directory, let missing, let cause):
            let list = missing.prefix(10).joined(separator: ", ") + (missing.count > 10 ? ", … (\(missing.count) in all)" : "")
            return "the Hub could not be reached (\(cause)) and \(repo) is not complete in \(directory); missing: \(list)"
        case .requestFailed(let repo, let reason):
            return "the download of \(repo) failed: \(reason)"
        case .timedOut(let repo):
            return "timed out waiting for \(repo); the transfer goes on"
        case .conflictingDirectories:
            return "give either cacheDir (the model's own directory) or cacheBaseDir (a base for models/<org>/<name>), not both"
        }
    }
}
