// XetCAS - the Xet side of the wire: the CAS read token (`xet-read-token`, refreshed before it
// expires or when the CAS answers 401) and the file reconstructions (v2, v1 when the CAS has no
// v2), asked for one page of the file's bytes at a time. The xorb bytes themselves are fetched
// by the transfer engine from the pre-signed URLs a reconstruction names.
import Curl
import Foundation
import HubTypes
import Xet

/// A CAS access token and where the CAS is.
public struct XetAccessToken: Sendable, Equatable {
    public let casURL: String
    public let token: String
    /// Unix seconds after which the CAS refuses it.
    public let expires: Double
}

/// One repo's CAS at one commit, with its read token; safe to share between threads.
public final class XetCAS: @unchecked Sendable {
    public let client: HubClient
    public let repo: RepoID
    public let commit: String
    /// A token is fetched anew when it has fewer seconds than this left (hf_xet uses 30 s).
    public static let refreshMargin: Double = 30
    private let lock = NSLock()
    private var current: XetAccessToken?
    /// The first token's CAS URL: a later token's is ignored, as hf_xet does, so the xorb URLs
    /// and reconstructions already in hand stay valid.
    private var casURL: String?
    /// The reconstruction version the CAS answers: v1 after a 404/501 to v2.
    private var version = XetReconstruction.Version.v2

    public init(client: HubClient, repo: RepoID, commit: String) {
        self.client = client
        self.repo = repo
        self.commit = commit
    }

    /// The token to use now: the one in hand unless it is near its expiry (or `stale`, the one
    /// the CAS just refused), else a new one from the Hub.
    public func token(refreshing stale: XetAccessToken? = nil, isCancelled: () -> Bool = { false }) throws -> XetAccessToken {
        if let token = lock.withLock({ current }), token != stale,
           token.expires - Date().timeIntervalSince1970 > XetCAS.refreshMargin {
            return token
        }
        let fresh = try client.retry.run(shouldStop: isCancelled) { try fetchToken() }
        return lock.withLock {
            if casURL == nil { casURL = fresh.casURL }
            let kept = XetAccessToken(casURL: casURL ?? fresh.casURL, token: fresh.token, expires: fresh.expires)
            current = kept
            return kept
        }
    }

    /// `GET {endpoint}/api/models/{repo}/xet-read-token/{commit}` with the Hub token: the JSON
    /// `{casUrl, accessToken, exp}`, or the same in the `X-Xet-*` headers.
    private func fetchToken() throws -> XetAccessToken {
        let url = client.apiURL(repo, "xet-read-token", commit)
        let response = try client.send(HTTPRequest(url: url, headers: client.headers(for: url), stallTimeout: client.stallTimeout),
                                       bodyLimit: BodyLimit.apiJSON)
        guard (200..<300).contains(response.status) else { throw HubError.from(response, repo: repo, revision: commit) }
        let json = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] ?? [:]
        let cas = (json["casUrl"] as? String) ?? response.headers["X-Xet-Cas-Url"]
        let token = (json["accessToken"] as? String) ?? response.headers["X-Xet-Access-Token"]
        let exp = (json["exp"] as? NSNumber)?.doubleValue ?? response.headers["X-Xet-Token-Expiration"].flatMap { Double($0) }
        guard let cas, let token, !token.isEmpty, let exp else {
            throw HubError.badResponse(url: url, reason: "the Xet read token answer lacks casUrl, accessToken or exp")
        }
        let scheme = URLComponents(string: cas)?.scheme?.lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw HubError.badResponse(url: url, reason: "the Xet CAS URL '\(cas.prefix(200))' is not http(s)")
        }
        return XetAccessToken(casURL: cas.hasSuffix("/") ? String(cas.dropLast()) : cas, token: token, expires: exp)
    }

    /// The reconstruction of bytes `first...last` of the file with Xet hash `fileHash` (hex), nil
    /// when `first` is past the file's end (416). Retries by the client's ladder; a 401 gets a
    /// new token and is asked again at once (at most `retry.attempts` times). `isCancelled` ends
    /// the retry ladder's waits early.
    public func reconstruction(of fileHash: String, first: Int64, last: Int64, path: String,
                               isCancelled: () -> Bool = { false }) throws -> XetReconstruction? {
        var refusals = 0
        var refused: XetAccessToken?
        while true {
            let token = try token(refreshing: refused, isCancelled: isCancelled)
            let version = lock.withLock { self.version }
            let url = "\(token.casURL)/v\(version.rawValue)/reconstructions/\(fileHash)"
            let response = try client.retry.run(shouldStop: isCancelled) {
                var request = HTTPRequest(url: url, headers: [("Authorization", "Bearer \(token.token)")], stallTimeout: client.stallTimeout)
                request.range = (first, last)
                let response = try client.send(request, bodyLimit: XetReconstruction.maximumBytes)
                if (500...599).contains(response.status) && response.status != 501 || response.status == 429 || response.status == 408 {
                    throw HubError.from(response, repo: repo, revision: commit, path: path)
                }
                return response
            }
            switch response.status {
            case 200..<300:
                do {
                    return try XetReconstruction.parse(response.body, version: version)
                } catch {
                    throw HubError.badResponse(url: url, reason: "the reconstruction of \(path) is unusable: \(error)")
                }
            case 401:
                refusals += 1
                guard refusals < client.retry.attempts else {
                    throw HubError.http(status: 401, url: url, message: "the Xet CAS refuses every new read token for \(path)", retryAfter: nil)
                }
                refused = token
            case 404 where version == .v2, 501 where version == .v2:
                lock.withLock { self.version = .v1 }
            case 416:
                return nil
            default:
                throw HubError.from(response, repo: repo, revision: commit, path: path)
            }
        }
    }
}
