// HubState - everything the two listeners share: the repos, the faults, the ledger, the
// access rules and the settings tests may change while the hub runs.
import Digest
import Foundation
import Xet

final class HubState: @unchecked Sendable {
    let catalog: RepoCatalog
    let faults = FaultBook()
    let ledger = TrafficLedger()
    let stopSignal = HubShutdown()
    /// The CAS of Xet-backed files.
    let xetStore: XetStore
    let baseURL: String
    let cdnURL: String
    /// Signs CDN URLs; new for each hub, so a URL from another run does not verify.
    let signingKey: String
    /// How long a signed CDN URL stays valid.
    let signatureLifetime: TimeInterval = 3600

    private let lock = NSLock()
    private var pageSize: Int
    private var oidPrefix = false
    private var gatedTokens: [String: String] = [:]
    private var privateTokens: [String: String] = [:]

    init(root: URL, baseURL: String, cdnURL: String, treePageSize: Int) {
        catalog = RepoCatalog(root: root)
        xetStore = XetStore(root: root)
        self.baseURL = baseURL
        self.cdnURL = cdnURL
        pageSize = max(1, treePageSize)
        var seed = SHA256()
        seed.update(Data("\(baseURL) \(cdnURL) \(Date().timeIntervalSince1970) \(getpid())".utf8))
        signingKey = seed.finalizeHex()
    }

    var treePageSize: Int {
        get { lock.withLock { pageSize } }
        set { lock.withLock { pageSize = max(1, newValue) } }
    }

    var lfsOidPrefix: Bool {
        get { lock.withLock { oidPrefix } }
        set { lock.withLock { oidPrefix = newValue } }
    }

    func setGated(_ repo: String, token: String) {
        lock.withLock { gatedTokens[repo] = token }
    }

    func setPrivate(_ repo: String, token: String) {
        lock.withLock { privateTokens[repo] = token }
    }

    /// Tree entries a hostile server adds for files that do not exist (path, size), per repo.
    private var forged: [String: [(path: String, size: Int)]] = [:]

    func forgeTreeEntry(_ repo: String, path: String, size: Int) {
        lock.withLock { forged[repo, default: []].append((path, size)) }
    }

    func forgedEntries(_ repo: String) -> [(path: String, size: Int)] { lock.withLock { forged[repo] ?? [] } }

    /// Tree entries given as raw JSON text, and commit ids the revision answer claims, per repo.
    private var rawForged: [String: [String]] = [:]
    private var forgedCommits: [String: String] = [:]

    func forgeRawTreeEntry(_ repo: String, json: String) { lock.withLock { rawForged[repo, default: []].append(json) } }
    func rawForgedEntries(_ repo: String) -> [String] { lock.withLock { rawForged[repo] ?? [] } }
    func forgeCommit(_ repo: String, sha: String) { lock.withLock { forgedCommits[repo] = sha } }
    func forgedCommit(_ repo: String) -> String? { lock.withLock { forgedCommits[repo] } }

    // MARK: - Xet

    private var xetAll = false
    private var xetOnly: Set<String> = []
    private var tokenLifetime: TimeInterval = 3600

    var xetEverywhere: Bool {
        get { lock.withLock { xetAll } }
        set { lock.withLock { xetAll = newValue } }
    }

    /// How long a Xet access token from `xet-read-token` is valid.
    var xetTokenLifetime: TimeInterval {
        get { lock.withLock { tokenLifetime } }
        set { lock.withLock { tokenLifetime = max(0, newValue) } }
    }

    func setXet(_ repo: String, _ on: Bool) {
        lock.withLock { if on { xetOnly.insert(repo) } else { xetOnly.remove(repo) } }
    }

    /// Whether the LFS files of `repo` are served through Xet.
    func isXet(_ repo: String) -> Bool { lock.withLock { xetAll || xetOnly.contains(repo) } }

    /// The Xet form of `file` when its repo is Xet-backed and it is an LFS file (not empty).
    func xetFile(_ file: ServedFile, of repo: String) -> XetFile? {
        guard file.isLFS, isXet(repo), let made = xetStore.xetFile(for: file) else { return nil }
        let key = "\(repo)/\(file.path)"
        lock.withLock {
            xetKeys[made.fileHash] = key
            xetFiles[key] = made
        }
        return made
    }

    /// The file key ("org/name/path") last served with this Xet hash: faults and counters go there.
    func xetFileKey(of hash: XetHash) -> String? { lock.withLock { xetKeys[hash] } }

    func xetFileKeyed(_ key: String) -> XetFile? { lock.withLock { xetFiles[key] } }

    private var xetKeys: [XetHash: String] = [:]
    private var xetFiles: [String: XetFile] = [:]

    /// A new CAS access token and its expiry (Unix seconds).
    func newXetToken() -> (token: String, expires: Int) {
        let expires = Int(Date().timeIntervalSince1970 + xetTokenLifetime)
        return ("xet_\(expires)_\(signature(object: "xet-token", expires: expires))", expires)
    }

    /// Whether a request to the CAS carries a token this hub issued that has not expired.
    func acceptsXetToken(_ request: HubRequest) -> Bool {
        guard let token = request.bearerToken else { return false }
        let parts = token.split(separator: "_")
        guard parts.count == 3, parts[0] == "xet", let expires = Int(parts[1]),
              String(parts[2]) == signature(object: "xet-token", expires: expires) else { return false }
        return Double(expires) > Date().timeIntervalSince1970
    }

    /// A pre-signed URL for xorb `xorb`, fetched for `fileKey` (faults and counters are the file's).
    func xorbURL(_ xorb: String, fileKey: String) -> String {
        let expires = Int(Date().timeIntervalSince1970 + signatureLifetime)
        return "\(cdnURL)/xorbs/\(xorb)?file=\(URLText.encodeComponent(fileKey))&expires=\(expires)"
            + "&sig=\(signature(object: "xorb \(xorb) \(fileKey)", expires: expires))"
    }

    /// The plain-HTTP bridge's signed URL for a Xet-backed file (the real Hub's cas-bridge).
    func bridgeLocation(for file: ServedFile, in snapshot: ServedTree) -> String {
        cdnLocation(for: file, in: snapshot).replacingOccurrences(of: "\(cdnURL)/cdn/", with: "\(cdnURL)/bridge/")
    }

    func isGated(_ repo: String) -> Bool { lock.withLock { gatedTokens[repo] != nil } }
    func isPrivate(_ repo: String) -> Bool { lock.withLock { privateTokens[repo] != nil } }

    /// The refusal a request to `repo` gets from the API and resolve endpoints, if any:
    /// a private repo without its token looks missing (401 RepoNotFound); a gated one
    /// answers 401 GatedRepo without a token and 403 GatedRepo with a wrong one.
    func refusal(for repo: String, request: HubRequest) -> HubResponse? {
        let (privateToken, gatedToken) = lock.withLock { (privateTokens[repo], gatedTokens[repo]) }
        let presented = request.bearerToken
        if let privateToken, presented != privateToken {
            return HubState.repoNotFound()
        }
        if let gatedToken, presented != gatedToken {
            if presented == nil {
                return .hubError(401, code: "GatedRepo", message: "Access to model \(repo) is restricted. "
                    + "You must have access to it and be authenticated to access it. Please log in.")
            }
            return .hubError(403, code: "GatedRepo", message: "Access to model \(repo) is restricted "
                + "and you are not in the authorized list. Ask for access on the repo's page.")
        }
        return nil
    }

    static func repoNotFound() -> HubResponse {
        .hubError(401, code: "RepoNotFound", message: "Repository not found")
    }

    static func revisionNotFound(_ revision: String) -> HubResponse {
        .hubError(404, code: "RevisionNotFound", message: "Invalid rev id: \(revision)")
    }

    /// The signature of a CDN object ("<org>/<name>/<commit>/<path>", decoded) valid until
    /// `expires` (Unix seconds).
    func signature(object: String, expires: Int) -> String {
        var h = SHA256()
        h.update(Data("\(signingKey)\n\(object)\n\(expires)".utf8))
        return h.finalizeHex()
    }

    /// A signed CDN URL for `file` of `snapshot`.
    func cdnLocation(for file: ServedFile, in snapshot: ServedTree) -> String {
        let path = "/cdn/\(URLText.encodePath(snapshot.repo))/\(snapshot.commit)/\(URLText.encodePath(file.path))"
        let expires = Int(Date().timeIntervalSince1970 + signatureLifetime)
        let object = "\(snapshot.repo)/\(snapshot.commit)/\(file.path)"
        return "\(cdnURL)\(path)?sig=\(signature(object: object, expires: expires))&expires=\(expires)"
    }
}
