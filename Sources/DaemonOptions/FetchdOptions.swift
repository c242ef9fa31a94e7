// FetchdOptions - what one daemon process is to do, as typed values: made from speech-fetchd's
// command line in one place (CommandLineKit's FetchdCommandLine.parse) and run by Daemon's
// FetchdProcess. A module of its own below both, so that neither imports the other.
import Foundation

/// What one daemon process is to do.
public struct FetchdOptions: Sendable {
    /// The cache base whose spool it serves (nil: the default base).
    public var cacheBase: URL?
    /// Worker processes (nil: enough for HF_DOWNLOAD_RANGE_CONCURRENCY).
    public var workers: Int?
    /// Ranges in flight per worker.
    public var slots: Int
    /// This node's name in claims (nil: SPEECH_FETCH_NODE or the host name).
    public var node: String?
    /// Run one worker instead of the supervisor.
    public var isWorker: Bool
    /// Serve only requests made on this node.
    public var ownRequestsOnly: Bool
    /// huggingface_hub caches requests may point into, besides the cache base (`--hf-cache`).
    public var hubCaches: [String]
    /// Hubs besides its own `HF_ENDPOINT` whose requests it fetches (`--allow-endpoint`).
    public var allowedEndpoints: [String]
    /// Serve Prometheus metrics at http://host:port/metrics (the supervisor only).
    public var metrics: (host: String, port: UInt16)?
    /// A cap on the node's download rate in bytes per second, shared by all its workers.
    public var maxRate: Int64?
    /// The file stdout and stderr append to, reopened on SIGHUP (nil: as given, SIGHUP ignored).
    public var log: String?
    /// A cap on the cache base's models in bytes (`--max-cache-size`), and the grace period in
    /// seconds (`--cache-grace`, default an hour): CacheAdmin's prune, run by the supervisor.
    public var maxCacheSize: Int64?
    public var cacheGrace: Double?
    /// A huggingface_hub cache whose revisions the size cap covers too (`--cap-hf-cache`).
    public var capHubCache: URL?
    /// `speech_fetchd_build_info`'s labels (version, commit, libcurl).
    public var build: [(String, String)]

    public init(cacheBase: URL? = nil, workers: Int? = nil, slots: Int = 4, node: String? = nil,
                isWorker: Bool = false, ownRequestsOnly: Bool = false, hubCaches: [String] = [], allowedEndpoints: [String] = [], metrics: (host: String, port: UInt16)? = nil,
                maxRate: Int64? = nil, maxCacheSize: Int64? = nil, cacheGrace: Double? = nil, capHubCache: URL? = nil, log: String? = nil, build: [(String, String)] = []) {
        self.cacheBase = cacheBase
        self.workers = workers
        self.slots = slots
        self.node = node
        self.isWorker = isWorker
        self.ownRequestsOnly = ownRequestsOnly
        self.hubCaches = hubCaches
        self.allowedEndpoints = allowedEndpoints
        self.metrics = metrics
        self.maxRate = maxRate
        self.log = log
        self.maxCacheSize = maxCacheSize
        self.cacheGrace = cacheGrace
        self.capHubCache = capHubCache
        self.build = build
    }
}
