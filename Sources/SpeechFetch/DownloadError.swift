// DownloadError - failures of a whole download call that are neither the Hub's, the cache's nor
// the daemon's own (HandoffError).
import Foundation

public enum DownloadError: Error, Sendable, CustomStringConvertible {
    /// The Hub could not be reached and the cache cannot satisfy the call.
    case hubUnreachable(repo: String, directory: String, missing: [String], cause: String)
    case conflictingDirectories

    public var description: String {
        switch self {
        case .hubUnreachable(let repo, let directory, let missing, let cause):
            let list = missing.prefix(10).joined(separator: ", ") + (missing.count > 10 ? ", … (\(missing.count) in all)" : "")
            return "the Hub could not be reached (\(cause)) and \(repo) is not complete in \(directory); missing: \(list)"
        case .conflictingDirectories:
            return "give either cacheDir (the model's own directory) or cacheBaseDir (a base for models/<org>/<name>), not both"
        }
    }
}
