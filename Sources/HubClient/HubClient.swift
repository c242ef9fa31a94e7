// HubClient - the Hub's API over libcurl: revision to commit, tree listing, file locations.
import Curl
import Foundation
import HubTypes

/// Where to fetch one file's bytes, and what the Hub says they are.
public struct FileLocation: Sendable, Equatable {
    /// The URL to GET (a CDN URL for LFS files; the resolve URL for small files).
    public let url: String
    /// Whether `url` is on the Hub itself (the token may go there).
    public let isHubOrigin: Bool
    /// The ETag to pin every range to (sha256 for LFS files, blob id otherwise), unquoted.
    public let etag: String?
    public let size: Int64?
    public let commit: String?
}

/// Talks to one Hub endpoint with one credential. Blocking calls; safe to share between threads.
public final class HubClient: Sendable {
    public let endpoint: HubEndpoint
    private let token: String?
    public let retry: RetryPolicy
    /// Seconds without a byte before an API call is abandoned.
    public let stallTimeout: Double
    private let session = HTTPSession()

    public init(endpoint: HubEndpoint = .fromEnvironment(), token: String? = HubToken.fromEnvironment(),
                retry: RetryPolicy = RetryPolicy(), stallTimeout: Double = 300) {
        self.endpoint = endpoint
        self.token = token
        self.retry = retry
        self.stallTimeout = stallTimeout
    }

    /// A client for the endpoint and token an environment names (`HF_ENDPOINT`, `HF_TOKEN`, the
    /// token file under `HF_HOME`).
    public static func fromEnvironment(_ environment: [String: String], retry: RetryPolicy, stallTimeout: Double) -> HubClient {
        HubClient(endpoint: .fromEnvironment(environment), token: HubToken.fromEnvironment(environment),
                  retry: retry, stallTimeout: stallTimeout)
    }

    /// True when a token is configured (never the token itself).
    public var hasToken: Bool { token != nil }

    // MARK: Resolution

    /// Resolves a revision (branch, tag or commit) to its commit id.
    public func commit(of repo: RepoID, revision: String) throws -> String {
        try HubClient.validateRevision(revision)
        let url = apiURL(repo, "revision", revision)
        // The first contact with the endpoint: nothing there at all fails at once (RetryPolicy.run).
        let response = try retry.run(firstContact: true) { try get(url, repo: repo, revision: revision, bodyLimit: BodyLimit.apiJSON) }
        guard let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
              let sha = json["sha"] as? String, !sha.isEmpty else {
            throw HubError.badResponse(url: url, reason: "no commit id ('sha') in the revision answer")
        }
        // Every later URL and every record names this commit: it must be one.
        guard HubClient.isHex(sha, length: 40) else {
            throw HubError.badTreeEntry(repo: repo, path: "", field: "sha",
                                        reason: "'\(sha.prefix(80))' is not a 40-hex commit id")
        }
        return sha.lowercased()
    }

    /// Refuses a revision that cannot name a branch, tag or commit (`Revision`'s rule), before
    /// it is sent.
    public static func validateRevision(_ revision: String) throws {
        if let reason = Revision.problem(with: revision) { throw HubError.invalidRevision(revision, reason: reason) }
    }

    static func isHex(_ s: String, length: Int) -> Bool {
        s.utf8.count == length && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) }
    }

    /// The most files one listing may hold, over all its pages (docs/protocol.md, "Trust").
    public static let maxTreeFiles = 1_000_000
    /// The most pages one listing may have.
    public static let maxTreePages = 10_000

    /// Lists every file of the repo at `commit` (recursive, all pages); directories are dropped
    /// and every path is validated. A listing that names a page twice (a `Link` loop), names a
    /// path twice, or passes `maxTreePages` pages or `maxTreeFiles` files is refused.
    public func files(of repo: RepoID, commit: String) throws -> [RepoFile] {
        var next: String? = apiURL(repo, "tree", commit) + "?recursive=true"
        var files: [RepoFile] = []
        var seenPages = Set<String>()
        var seenPaths = Set<PathBytes>()  // bytes: the NFC and NFD spellings of a name are two files
        while let url = next {
            guard seenPages.insert(url).inserted else {
                throw HubError.badResponse(url: url, reason: "the tree listing's Link header leads back to a page already read (a loop)")
            }
            if seenPages.count > HubClient.maxTreePages {
                throw HubError.badResponse(url: url, reason: "the tree listing has more than \(HubClient.maxTreePages) pages")
            }
            let response = try retry.run { try get(url, repo: repo, revision: commit, bodyLimit: BodyLimit.treePage) }
            for file in try HubClient.treeFiles(response.body, of: repo, url: url) {
                guard seenPaths.insert(PathBytes(file.path)).inserted else {
                    throw HubError.badTreeEntry(repo: repo, path: file.path, field: "path", reason: "the listing names it twice")
                }
                files.append(file)
            }
            if files.count > HubClient.maxTreeFiles {
                throw HubError.badResponse(url: url, reason: "the tree listing names more than \(HubClient.maxTreeFiles) files")
            }
            next = HubClient.nextLink(response.headers["Link"], relativeTo: url)
        }
        return files
    }

    /// The files of one tree page (`url` names it in errors): directories dropped, every path
    /// validated.
    public static func treeFiles(_ body: Data, of repo: RepoID, url: String) throws -> [RepoFile] {
        guard let entries = try? JSONSerialization.jsonObject(with: body) as? [[String: Any]] else {
            throw HubError.badResponse(url: url, reason: "the tree answer is not a JSON array")
        }
        var files: [RepoFile] = []
        for entry in entries where (entry["type"] as? String) != "directory" {
            guard let path = entry["path"] as? String else {
                throw HubError.badResponse(url: url, reason: "a tree entry has no path")
            }
            try RepoPath.validate(path, in: repo)
            files.append(try treeFile(entry, path: path, repo: repo))
        }
        return files
    }

    /// The git blob id and the SHA-256 of an empty file.
    static let emptyBlobID = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The largest file size taken from a listing: 2^53 bytes (8 PiB), the largest integer a
    /// JSON number carries exactly. Anything above is a broken or hostile answer.
    public static let maxFileSize: Int64 = 1 << 53

    /// One file of a tree listing, with every field checked: `size` (an integer from 0 to
    /// 2^53, not wrapped), `oid` (40 hex, the git blob id every git-stored file is verified
    /// against), and for LFS files `lfs.oid` (64 hex, optionally `sha256:`) and `lfs.size`
    /// equal to `size`. A missing or malformed field is an error naming repo, path and field:
    /// a file is never fetched (or written empty) on a guess.
    static func treeFile(_ entry: [String: Any], path: String, repo: RepoID) throws -> RepoFile {
        func refuse(_ field: String, _ reason: String) -> HubError {
            .badTreeEntry(repo: repo, path: path, field: field, reason: reason)
        }
        func size(_ value: Any?, field: String) throws -> Int64 {
            guard let value else { throw refuse(field, "missing") }
            // JSONSerialization gives big integers as NSNumber (wrapping them through int64Value)
            // or Decimal; only an exact integer in range is a size.
            // (`is Bool` holds for the NSNumbers 0 and 1 too: a JSON true is told by its class.)
            guard let number = value as? NSNumber, String(describing: type(of: value)) != "__NSCFBoolean" else {
                throw refuse(field, "'\(value)' is not a number")
            }
            let text = number.stringValue
            guard let exact = Int64(text), exact >= 0, exact <= maxFileSize else {
                throw refuse(field, "\(text) is not a byte count from 0 to 2^53")
            }
            return exact
        }
        let fileSize = try size(entry["size"], field: "size")
        guard let oid = entry["oid"] as? String else { throw refuse("oid", "missing") }
        guard isHex(oid, length: 40) else { throw refuse("oid", "'\(oid.prefix(80))' is not a 40-hex git blob id") }
        // An empty file has exactly one blob id: any other names content a size of 0 cannot hold.
        if fileSize == 0, entry["lfs"] == nil || entry["lfs"] is NSNull, oid.lowercased() != emptyBlobID {
            throw refuse("oid", "size 0 but '\(oid)' is not the empty file's blob id (\(emptyBlobID))")
        }
        var sha256: String?
        if let raw = entry["lfs"], !(raw is NSNull) {
            guard let lfs = raw as? [String: Any] else { throw refuse("lfs", "not an object") }
            guard var hex = (lfs["oid"] as? String) ?? (lfs["sha256"] as? String) else { throw refuse("lfs.oid", "missing") }
            if hex.hasPrefix("sha256:") { hex = String(hex.dropFirst(7)) }
            guard isHex(hex, length: 64) else { throw refuse("lfs.oid", "'\(hex.prefix(80))' is not a 64-hex SHA-256") }
            if lfs["size"] != nil {
                let lfsSize = try size(lfs["size"], field: "lfs.size")
                guard lfsSize == fileSize else { throw refuse("lfs.size", "\(lfsSize) differs from size \(fileSize)") }
            }
            if fileSize == 0, hex.lowercased() != emptySHA256 {
                throw refuse("lfs.oid", "size 0 but '\(hex)' is not the empty file's SHA-256")
            }
            sha256 = hex.lowercased()
        }
        // A Xet-backed LFS file names its Xet hash: the native Xet path fetches it by that name.
        var xetHash: String?
        if let raw = entry["xetHash"], !(raw is NSNull), sha256 != nil, fileSize > 0 {
            guard let hex = raw as? String, isHex(hex, length: 64) else {
                throw refuse("xetHash", "'\(String(describing: raw).prefix(80))' is not a 64-hex Xet hash")
            }
            xetHash = hex.lowercased()
        }
        return RepoFile(path: path, size: fileSize, blobID: oid.lowercased(), sha256: sha256, xetHash: xetHash)
    }

    /// Resolves the revision once and lists the tree at that commit.
    public func snapshot(of repo: RepoID, revision: String) throws -> RepoSnapshot {
        let commit = try commit(of: repo, revision: revision)
        return RepoSnapshot(repo: repo.description, revision: revision, commit: commit,
                            files: try files(of: repo, commit: commit))
    }

    // MARK: File locations

    /// The resolve URL of a file at a commit.
    public func resolveURL(_ repo: RepoID, commit: String, path: String) -> String {
        "\(endpoint.url)/\(repo.org)/\(repo.name)/resolve/\(HubClient.encode(commit))/"
            + path.split(separator: "/").map { HubClient.encode(String($0)) }.joined(separator: "/")
    }

    /// Asks the Hub where a file's bytes are (HEAD, redirects on the Hub host followed, the CDN redirect kept).
    public func locate(_ repo: RepoID, commit: String, path: String) throws -> FileLocation {
        try retry.run {
            var url = resolveURL(repo, commit: commit, path: path)
            for _ in 0..<10 {
                let response = try send(HTTPRequest(url: url, method: .head, headers: headers(for: url),
                                                    stallTimeout: stallTimeout))
                let linkedEtag = response.headers["X-Linked-Etag"].map(HubClient.unquote)
                let linkedSize = response.headers["X-Linked-Size"].flatMap { Int64($0) }
                let commitHeader = response.headers["X-Repo-Commit"]
                switch response.status {
                case 200..<300:
                    return FileLocation(url: url, isHubOrigin: endpoint.isSameOrigin(url),
                                        etag: linkedEtag ?? response.headers["ETag"].map(HubClient.unquote),
                                        size: linkedSize ?? response.headers["Content-Length"].flatMap { Int64($0) },
                                        commit: commitHeader)
                case 300..<400:
                    guard let location = response.headers["Location"],
                          let target = URL(string: location, relativeTo: URL(string: url))?.absoluteString else {
                        throw HubError.badResponse(url: url, reason: "redirect without a Location")
                    }
                    try checkRedirect(from: url, to: target)
                    if endpoint.isSameOrigin(target) && linkedEtag == nil {
                        url = target  // a renamed repo: follow on the Hub host
                        continue
                    }
                    return FileLocation(url: target, isHubOrigin: endpoint.isSameOrigin(target), etag: linkedEtag,
                                        size: linkedSize, commit: commitHeader)
                default:
                    throw HubError.from(response, repo: repo, revision: commit, path: path)
                }
            }
            throw HubError.badResponse(url: url, reason: "too many redirects")
        }
    }

    /// Refuses a redirect this client must not follow: to any scheme but http and https
    /// (`file://`, `ftp://`, …), or from https to http while the endpoint itself is https (a
    /// downgrade would send the request, and what it learns, in clear text).
    public func checkRedirect(from url: String, to target: String) throws {
        try HubClient.checkRedirect(from: url, to: target, endpoint: endpoint)
    }

    /// `checkRedirect(from:to:)` for a client of `endpoint` (nil: the scheme rule alone).
    public static func checkRedirect(from url: String, to target: String, endpoint: HubEndpoint?) throws {
        let scheme = URLComponents(string: target)?.scheme?.lowercased() ?? ""
        guard scheme == "http" || scheme == "https" else {
            throw HubError.badResponse(url: url, reason: "it redirects to '\(target.prefix(200))'; only http and https are followed")
        }
        if scheme == "http", endpoint?.scheme == "https" {
            throw HubError.badResponse(url: url, reason: "it redirects from https to plain http ('\(target.prefix(200))'); "
                                       + "a downgrade is followed only when HF_ENDPOINT itself is http")
        }
    }

    /// Request headers for `url`: the token only when `url` is on the Hub's own origin.
    public func headers(for url: String) -> [(name: String, value: String)] {
        guard let token, endpoint.isSameOrigin(url) else { return [] }
        return [("Authorization", "Bearer \(token)")]
    }

    /// GETs a URL with its body in memory, following redirects; the token never leaves the Hub origin.
    public func fetchSmall(_ url: String, repo: RepoID, path: String? = nil, bodyLimit: Int = 64 << 20) throws -> HTTPResponse {
        var current = url
        for _ in 0..<10 {
            let response = try send(HTTPRequest(url: current, headers: headers(for: current), stallTimeout: stallTimeout),
                                    bodyLimit: bodyLimit)
            if (300..<400).contains(response.status), let location = response.headers["Location"],
               let target = URL(string: location, relativeTo: URL(string: current))?.absoluteString {
                try checkRedirect(from: current, to: target)
                current = target
                continue
            }
            guard (200..<300).contains(response.status) else { throw HubError.from(response, repo: repo, path: path) }
            return response
        }
        throw HubError.badResponse(url: url, reason: "too many redirects")
    }

    // MARK: Plumbing

    private func get(_ url: String, repo: RepoID, revision: String, bodyLimit: Int) throws -> HTTPResponse {
        let response = try send(HTTPRequest(url: url, headers: headers(for: url), stallTimeout: stallTimeout),
                                bodyLimit: bodyLimit)
        guard (200..<300).contains(response.status) else { throw HubError.from(response, repo: repo, revision: revision) }
        return response
    }

    func send(_ request: HTTPRequest, bodyLimit: Int = BodyLimit.errorPage) throws -> HTTPResponse {
        do {
            return try session.perform(request, bodyLimit: bodyLimit)
        } catch let error as TransportError {
            throw HubError.transport(error)
        } catch let error as BodyTooLarge {
            throw HubError.badResponse(url: error.url, reason: error.reason)
        }
    }

    func apiURL(_ repo: RepoID, _ kind: String, _ revision: String) -> String {
        "\(endpoint.url)/api/models/\(repo.org)/\(repo.name)/\(kind)/\(HubClient.encode(revision))"
    }

    /// Percent-encodes one path component (a revision like `refs/pr/1` keeps its slash encoded).
    static func encode(_ component: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return component.addingPercentEncoding(withAllowedCharacters: allowed) ?? component
    }

    static func unquote(_ value: String) -> String {
        var v = value.trimmingCharacters(in: .whitespaces)
        if v.hasPrefix("W/") { v.removeFirst(2) }
        if v.hasPrefix("\""), v.hasSuffix("\""), v.count >= 2 { v = String(v.dropFirst().dropLast()) }
        return v
    }

    /// The `rel="next"` target of a Link header (RFC 8288), made absolute. Links are split only
    /// at commas outside `<…>`, since a URL may itself contain commas.
    public static func nextLink(_ header: String?, relativeTo base: String) -> String? {
        guard let header else { return nil }
        var links: [Substring] = []
        var start = header.startIndex
        var inURL = false
        for i in header.indices {
            switch header[i] {
            case "<": inURL = true
            case ">": inURL = false
            case "," where !inURL:
                links.append(header[start..<i])
                start = header.index(after: i)
            default: break
            }
        }
        links.append(header[start...])
        for link in links {
            let trimmed = link.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("<"), let close = trimmed.firstIndex(of: ">") else { continue }
            let target = String(trimmed[trimmed.index(after: trimmed.startIndex)..<close])
            let params = trimmed[trimmed.index(after: close)...].split(separator: ";")
                .map { $0.replacingOccurrences(of: " ", with: "").lowercased() }
            let isNext = params.contains { p in
                guard p.hasPrefix("rel=") else { return false }
                let value = p.dropFirst(4).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                return value.split(separator: " ").contains("next")
            }
            if isNext { return URL(string: target, relativeTo: URL(string: base))?.absoluteString }
        }
        return nil
    }
}
