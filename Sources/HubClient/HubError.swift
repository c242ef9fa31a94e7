// HubError - every way talking to the Hub can fail, typed so callers can tell an answer from silence.
import Curl
import Foundation
import HubTypes

public enum HubError: Error, Sendable, CustomStringConvertible {
    /// A revision that cannot name a branch, tag or commit (refused before it is sent).
    case invalidRevision(String, reason: String)
    /// A tree entry (or revision answer) field the client cannot trust: nothing is fetched for it.
    case badTreeEntry(repo: RepoID, path: String, field: String, reason: String)
    case repoNotFound(RepoID)
    case gatedRepo(RepoID, message: String)
    case revisionNotFound(RepoID, revision: String)
    case entryNotFound(RepoID, path: String)
    /// Any other HTTP answer; `retryAfter` from the header, in seconds.
    case http(status: Int, url: String, message: String, retryAfter: Double?)
    /// The Hub or CDN could not be reached at all. The only case that may fall back to the cache.
    case transport(TransportError)
    /// An answer we cannot use (malformed JSON, missing headers).
    case badResponse(url: String, reason: String)

    /// True for failures where no HTTP answer came.
    public var isTransport: Bool {
        if case .transport = self { return true }
        return false
    }

    /// True when nothing answered at all: libcurl's "could not resolve proxy" (5), "could not
    /// resolve host" (6) or "could not connect" (7: refused, no route). A stall, a timeout or a
    /// reset did reach a server, or may have.
    public var isUnreachable: Bool {
        if case .transport(let failure) = self { return !failure.isStall && [5, 6, 7].contains(failure.code) }
        return false
    }

    /// True when trying again may help: transport failures, stalls, 408, 429 and 5xx.
    public var isRetryable: Bool {
        switch self {
        case .transport: return true
        case .http(let status, _, _, _): return status == 408 || status == 429 || (500...599).contains(status)
        default: return false
        }
    }

    public var retryAfter: Double? {
        if case .http(_, _, _, let after) = self { return after }
        return nil
    }

    public var description: String {
        switch self {
        case .invalidRevision(let raw, let reason):
            return "invalid revision '\(raw)': \(reason); give a branch, a tag or a 40-hex commit id"
        case .badTreeEntry(let repo, let path, let field, let reason):
            return "the Hub's listing of \(repo) is unusable at \(path.isEmpty ? "the revision answer" : "'\(path)'"), "
                + "field '\(field)': \(reason); nothing was fetched (a mirror or proxy may have altered the answer)"
        case .repoNotFound(let repo):
            return "repository \(repo) not found on the Hub (or it is private: set HF_TOKEN to a token that can read it)"
        case .gatedRepo(let repo, let message):
            return "repository \(repo) is gated: accept its terms on the Hub page and set HF_TOKEN to a token of that account"
                + (message.isEmpty ? "" : " (\(message))")
        case .revisionNotFound(let repo, let revision):
            return "revision '\(revision)' not found in \(repo): check the branch, tag or commit id"
        case .entryNotFound(let repo, let path):
            return "file '\(path)' not found in \(repo)"
        case .http(let status, let url, let message, _):
            return "HTTP \(status) from \(url)" + (message.isEmpty ? "" : ": \(message)")
        case .transport(let error):
            // Only nothing answering is "could not reach": a reset, a cut body or a stall came
            // after a server answered (the ladder retries both alike).
            return isUnreachable ? "could not reach the Hub: \(error)" : "the connection broke off: \(error)"
        case .badResponse(let url, let reason):
            return "unusable answer from \(url): \(reason)"
        }
    }

    /// Maps a non-success HTTP answer to the typed error the Hub's `X-Error-Code` names.
    public static func from(_ response: HTTPResponse, repo: RepoID, revision: String? = nil, path: String? = nil) -> HubError {
        let code = response.headers["X-Error-Code"] ?? ""
        let message = errorMessage(response)
        switch (code, response.status) {
        case ("GatedRepo", _):
            return .gatedRepo(repo, message: message)
        case ("RepoNotFound", _):
            return .repoNotFound(repo)
        case ("RevisionNotFound", _):
            return .revisionNotFound(repo, revision: revision ?? "?")
        case ("EntryNotFound", _):
            return .entryNotFound(repo, path: path ?? "?")
        case (_, 401):
            return .repoNotFound(repo)
        default:
            return .http(status: response.status, url: response.url, message: message,
                         retryAfter: retryAfterSeconds(response.headers["Retry-After"]))
        }
    }

    /// A `Retry-After` header's delay in seconds (the delay-seconds form; an HTTP date is nil).
    public static func retryAfterSeconds(_ header: String?) -> Double? {
        header.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    }

    private static func errorMessage(_ response: HTTPResponse) -> String {
        if let header = response.headers["X-Error-Message"] { return header }
        if let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
           let error = json["error"] as? String { return error }
        return ""
    }
}
