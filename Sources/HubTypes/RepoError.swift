// RepoError - a repo id or a file path that cannot name anything on disk: refused before use.
import Foundation

public enum RepoError: Error, Sendable, CustomStringConvertible {
    case invalidRepoID(String, reason: String)
    /// A path the Hub listed that is not a safe relative path inside the repo.
    case unsafePath(String, repo: RepoID, reason: String)

    public var description: String {
        switch self {
        case .invalidRepoID(let raw, let reason):
            return "invalid repo id '\(raw)': \(reason)"
        case .unsafePath(let path, let repo, let reason):
            return "refusing file path '\(path)' listed by \(repo): \(reason); nothing was written for it"
        }
    }
}
