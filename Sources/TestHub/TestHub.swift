// TestHub - a local stand-in for the Hugging Face Hub on two loopback ports: the Hub (API
// and resolve) and a CDN origin for LFS bodies. Repos are folders under a root; faults
// and counters let tests drive and check a client's downloads byte by byte.
import Foundation

/// A local Hugging Face Hub for tests, serving every `<org>/<name>/` folder under `root`
/// as a model repo with the single revision `main`.
///
/// It starts serving in `init` and stops in `stop()` (or when released). All methods may
/// be called from any thread.
public final class TestHub: @unchecked Sendable {
    /// "http://127.0.0.1:<port>", no trailing slash: what `HF_ENDPOINT` should be.
    public let baseURL: String
    /// "http://<cdnHost>:<cdnPort>": where LFS resolves redirect to.
    public let cdnURL: String
    /// The folder whose `<org>/<name>/` subfolders are the repos.
    public let root: URL

    private let state: HubState
    private let hubListener: SocketListener
    private let cdnListener: SocketListener

    /// Starts serving `root` at once.
    /// - Parameters:
    ///   - port: The Hub's port; 0 picks a free one.
    ///   - cdnPort: The CDN's port; 0 picks a free one.
    ///   - cdnHost: The CDN's loopback address. Another address than the Hub's (127.0.0.2, as
    ///     `speech-testhub` uses) makes the redirect change host, as the Hub's CDN redirects do,
    ///     which huggingface_hub 1.x needs to stop there; 127.0.0.1 (the default) keeps tools that
    ///     only know the Hub's address (raw-socket tests, proxies) working.
    ///   - treePageSize: Entries per tree page (the Hub uses 1000; 50 at most with `expand=true`).
    /// - Throws: `TestHubError.cannotListen` when a port cannot be bound, `.notLoopback` for a
    ///   `cdnHost` outside 127/8.
    public init(root: URL, port: UInt16 = 0, cdnPort: UInt16 = 0, cdnHost: String = "127.0.0.1",
                treePageSize: Int = 1000) throws {
        self.root = root.standardizedFileURL
        try? FileManager.default.createDirectory(at: self.root, withIntermediateDirectories: true)
        hubListener = try SocketListener(port: port)
        cdnListener = try SocketListener(host: cdnHost, port: cdnPort)
        baseURL = "http://127.0.0.1:\(hubListener.port)"
        cdnURL = "http://\(cdnHost):\(cdnListener.port)"
        let state = HubState(root: self.root, baseURL: baseURL, cdnURL: cdnURL, treePageSize: treePageSize)
        self.state = state
        let hubRoutes = HubRoutes(state: state)
        let cdnOrigin = CDNOrigin(state: state)
        hubListener.start { socket in
            HTTPConnection(socket: socket, listener: .hub, state: state, answer: hubRoutes.answer).serve()
        }
        cdnListener.start { socket in
            HTTPConnection(socket: socket, listener: .cdn, state: state, answer: cdnOrigin.answer).serve()
        }
    }

    deinit {
        stop()
    }

    /// Closes both listeners and every open connection (waking stalled ones). Idempotent.
    public func stop() {
        state.stopSignal.stop()
        hubListener.stop()
        cdnListener.stop()
    }

    /// Entries per page of the tree listing (at least 1).
    public var treePageSize: Int {
        get { state.treePageSize }
        set { state.treePageSize = newValue }
    }

    /// Whether tree entries write `lfs.oid` as "sha256:<hex>" instead of bare hex (the Hub has done both).
    public var lfsOidPrefix: Bool {
        get { state.lfsOidPrefix }
        set { state.lfsOidPrefix = newValue }
    }

    /// Makes the tree listing of `repo` also name `path` (e.g. `../../etc/evil`), a file that does
    /// not exist: a hostile or broken server, for testing that clients refuse unsafe paths.
    public func forgeTreeEntry(_ repo: String, path: String, size: Int = 16) {
        state.forgeTreeEntry(repo, path: path, size: size)
    }

    /// Makes the tree listing of `repo` also carry `json`, written as given (a size past 2^64,
    /// an entry without `oid`, a non-hex LFS oid): a broken server, for testing that clients
    /// refuse a bad entry at resolve time (from tests only).
    public func forgeTreeEntry(_ repo: String, json: String) {
        state.forgeRawTreeEntry(repo, json: json)
    }

    /// Makes the revision answer of `repo` claim `sha` as its commit (e.g. not hex), from tests only.
    public func forgeCommit(_ repo: String, sha: String) {
        state.forgeCommit(repo, sha: sha)
    }

    // MARK: - Xet

    /// Whether every LFS file of every repo is served through Xet (`speech-testhub --xet`).
    public var xetEverywhere: Bool {
        get { state.xetEverywhere }
        set { state.xetEverywhere = newValue }
    }

    /// Serves the LFS files of `repo` through Xet (or not), whatever `xetEverywhere` says for others.
    public func setXet(_ repo: String, _ on: Bool = true) {
        state.setXet(repo, on)
    }

    /// How long the access tokens of `xet-read-token` are valid (default 3600 s); a short one
    /// makes clients refresh mid-download.
    public var xetTokenLifetime: TimeInterval {
        get { state.xetTokenLifetime }
        set { state.xetTokenLifetime = newValue }
    }

    /// The Xet hash (`X-Xet-Hash`) the test Hub gives the file "<org>/<name>/<path>", or nil when
    /// it is not Xet-backed.
    public func xetHash(of file: String) -> String? {
        let parts = file.split(separator: "/", maxSplits: 2).map(String.init)
        guard parts.count == 3, let snapshot = state.catalog.snapshot(of: "\(parts[0])/\(parts[1])"),
              let served = snapshot.file(at: parts[2]) else { return nil }
        return state.xetFile(served, of: snapshot.repo)?.fileHash.hex
    }

    /// The Xet hash (hex) and size of a file on disk, as `hf_xet.hash_files` computes it.
    public static func xetHash(ofFileAt path: String) throws -> (hash: String, size: Int) {
        let (hash, size) = try XetFileHasher.hash(path: path)
        return (hash.hex, size)
    }

    // MARK: - Repos

    /// Writes files of deterministic pseudo-random bytes into `root/<repo>/`, each seeded
    /// from the repo, its path and `seed`. Other files of the repo are left alone.
    /// - Parameter files: Repo path → size in bytes.
    public static func generateRepo(root: URL, repo: String, files: [String: Int], seed: UInt64 = 0) throws {
        try RepoWriter.generate(root: root, repo: repo, files: files, seed: seed)
    }

    /// Writes the given files into `root/<repo>/`; other files of the repo are left alone.
    public static func writeRepo(root: URL, repo: String, files: [String: Data]) throws {
        try RepoWriter.write(root: root, repo: repo, files: files)
    }

    /// Makes `repo` gated: API and resolve requests without `Authorization: Bearer <token>`
    /// get 401 GatedRepo (403 with another token). The CDN is not affected.
    public func setGated(_ repo: String, token: String) {
        state.setGated(repo, token: token)
    }

    /// Makes `repo` private: API and resolve requests without `Authorization: Bearer <token>`
    /// get 401 RepoNotFound, as if it did not exist.
    public func setPrivateToken(_ repo: String, token: String) {
        state.setPrivate(repo, token: token)
    }

    // MARK: - Faults

    /// Adds a fault to the file "<org>/<name>/<path in repo>"; faults already set stay.
    public func setFault(_ fault: Fault, for file: String) {
        state.faults.add(fault, for: file)
    }

    public func clearFaults() {
        state.faults.clear()
    }

    // MARK: - Counters

    /// GET and HEAD requests that reached the file's resolve or CDN endpoint (each HTTP request counts).
    public func requests(for file: String) -> Int {
        state.ledger.requests(for: file)
    }

    /// Body bytes of the file written to sockets (resolve and CDN).
    public func bodyBytes(for file: String) -> Int {
        state.ledger.bodyBytes(for: file)
    }

    /// The byte ranges of the file actually sent, one per body in the order they began:
    /// `start ..< start + bytesWritten`.
    public func servedRanges(for file: String) -> [Range<Int>] {
        state.ledger.servedRanges(for: file)
    }

    /// Every HTTP request to either port.
    public var totalRequests: Int {
        state.ledger.totalRequests
    }

    /// "hub METHOD /path?query" or "cdn METHOD /path?query", in arrival order.
    public func requestLog() -> [String] {
        state.ledger.requestLog
    }

    /// Whether any request on that listener carried an Authorization header.
    public func sawAuthorization(onCDN: Bool) -> Bool {
        state.ledger.sawAuthorization(on: onCDN ? .cdn : .hub)
    }

    /// Calls `observer` with each request-log line as it arrives, and whether the request
    /// carried an Authorization header (on the connection's thread); nil stops it.
    /// speech-testhub's `--log` prints them.
    public func observeRequests(_ observer: (@Sendable (_ line: String, _ hadAuthorization: Bool) -> Void)?) {
        state.ledger.observe(observer)
    }

    /// Reconstruction answers (200) given for the Xet-backed file.
    public func reconstructions(for file: String) -> Int {
        state.ledger.reconstructions(for: file)
    }

    /// Xorb range requests made for the file (through the URLs its reconstructions gave).
    public func xorbRangeRequests(for file: String) -> Int {
        state.ledger.xorbRangeRequests(for: file)
    }

    /// Xorb bytes written to sockets for the file.
    public func xorbBytes(for file: String) -> Int {
        state.ledger.xorbBytes(for: file)
    }

    /// Bytes of the Xet-backed file sent through the plain resolve's bridge (also in `bodyBytes`).
    public func bridgeBytes(for file: String) -> Int {
        state.ledger.bridgeBytes(for: file)
    }

    /// Totals over every file: reconstructions, xorb bytes and bridge bytes.
    public var xetTotals: (reconstructions: Int, xorbBytes: Int, bridgeBytes: Int) {
        (state.ledger.totalReconstructions, state.ledger.totalXorbBytes, state.ledger.totalBridgeBytes)
    }

    public func resetCounters() {
        state.ledger.reset()
    }
}
