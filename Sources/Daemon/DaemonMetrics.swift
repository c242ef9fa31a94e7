// DaemonMetrics - what `speech-fetchd --metrics` reports, in the Prometheus text exposition
// format (version 0.0.4, MetricsPage.swift): counters the supervisor bumps as things happen, and
// gauges read from the spool when the page is asked for.
//
// The counters live in this process (they start at 0 with each daemon, as Prometheus expects
// of a counter); the spool's gauges are one look per scrape that keeps what cannot have changed
// (SpoolGauges.swift: listings of the job folders while something moves, one fstat while the
// spool is idle), and the cache's size and model count a walk at most every 30 s, so a scrape
// costs the daemon under a millisecond of CPU and the file server little.
import Foundation
import ModelCache
import SharedFiles
import Spool
import Synchronization
import Transfer

/// The supervisor's event counters and the page that reports them with the spool's state.
public final class DaemonMetrics: Sendable {
    /// Labels of `speech_fetchd_build_info`: version, commit, libcurl (the executable's `--version`).
    let build: [(String, String)]
    let cacheBase: URL
    let environment: [String: String]
    private let counts = Mutex(Counts())
    private let cacheLook = Mutex<(at: Date, bytes: Int64, models: Int)?>(nil)
    /// The spool's reader, kept from scrape to scrape (SpoolGauges.swift); nil until the spool opens.
    private let gaugeReader = Mutex<SpoolGaugeReader?>(nil)
    /// How long a walk of the cache's models is reused.
    static let cacheLookInterval: TimeInterval = 30

    struct Counts {
        var revoked = 0
        var planned = 0
        var files = 0
        var bytes: Int64 = 0
        var requests: [String: Int] = [:]
        var failures: [String: Int] = [:]
    }

    public init(cacheBase: URL, build: [(String, String)], environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.cacheBase = cacheBase
        self.build = build
        self.environment = environment
    }

    // MARK: Events (called by the supervisor)

    /// Claims the supervisor revoked (their holder died or their lease ran out).
    func revoked(_ count: Int) {
        guard count > 0 else { return }
        counts.withLock { $0.revoked += count }
    }

    /// Range jobs the planner made ready (a file's ranges its sidecar does not hold yet).
    func planned(_ count: Int) {
        counts.withLock { $0.planned += count }
    }

    /// A request the supervisor saw settle: failed with a kind of failure, or done with the files
    /// and bytes it asked for.
    func settled(failed kind: FailureKind?, files: Int = 0, bytes: Int64 = 0) {
        counts.withLock { c in
            c.requests[kind == nil ? "done" : "failed", default: 0] += 1
            if let kind { c.failures[DaemonMetrics.label(of: kind), default: 0] += 1 }
            c.files += files
            c.bytes += bytes
        }
    }

    /// The `kind` label of `speech_fetchd_failures_total`: a short fixed set (`failureLabels`),
    /// decided by the recorded kind, never by the wording of the reason.
    static func label(of kind: FailureKind) -> String {
        switch kind {
        case .cancelled: return "cancelled"
        case .checksumMismatch: return "verification"
        case .diskFull: return "disk"
        case .notFound, .gated, .httpError, .badAnswer: return "hub"
        case .transport: return "network"
        case .refused, .local, .other: return "other"
        }
    }

    /// Every value of the `kind` label, in the page's order.
    static let failureLabels = ["cancelled", "disk", "hub", "network", "verification", "other"]

    // MARK: The page

    /// The whole page, as of now.
    public func page() -> String {
        var page = MetricsPage()
        let c = counts.withLock { $0 }
        page.add("speech_fetchd_build_info", type: "gauge", help: "The daemon's build: version, commit and the libcurl it loads.",
                 [(build, 1)])

        if let gauges = spoolGauges() {
            page.add("speech_fetchd_requests", type: "gauge", help: "Requests in the spool by state.",
                     gauges.requests.sorted { $0.key < $1.key }.map { ([("state", $0.key)], Double($0.value)) })
            page.add("speech_fetchd_range_jobs", type: "gauge",
                     help: "Range jobs of unfinished files: ready to claim, claimed (in flight on some node), fetched and waiting to be spliced.",
                     [([("state", "ready")], Double(gauges.ready)), ([("state", "claimed")], Double(gauges.claimed)),
                      ([("state", "fetched")], Double(gauges.fetched))])
            page.add("speech_fetchd_active_transfers", type: "gauge",
                     help: "Worker processes of each node with a range in flight.",
                     gauges.busyWorkers.sorted { $0.key < $1.key }.map { ([("node", $0.key)], Double($0.value)) })
            page.add("speech_fetchd_supervisors", type: "gauge", help: "Nodes whose speech-fetchd serves this spool.",
                     [([], Double(gauges.supervisors))])
            page.add("speech_fetchd_corrupt_records", type: "gauge", help: "Unreadable spool records set aside in corrupt/.",
                     [([], Double(gauges.corruptRecords))])
        }

        page.add("speech_fetchd_range_jobs_planned_total", type: "counter",
                 help: "Range jobs this supervisor planned; those not ready or claimed any more were fetched (or dropped by a cancel).",
                 [([], Double(c.planned))])
        page.add("speech_fetchd_files_fetched_total", type: "counter", help: "Files of the requests that finished done.",
                 [([], Double(c.files))])
        page.add("speech_fetchd_bytes_fetched_total", type: "counter", help: "Bytes of the files of the requests that finished done.",
                 [([], Double(c.bytes))])
        page.add("speech_fetchd_claims_revoked_total", type: "counter",
                 help: "Claims this supervisor revoked (holder gone or lease expired); their ranges went back to ready.",
                 [([], Double(c.revoked))])
        page.add("speech_fetchd_requests_settled_total", type: "counter", help: "Requests this supervisor saw finish, by outcome.",
                 ["done", "failed"].map { ([("outcome", $0)], Double(c.requests[$0] ?? 0)) })
        page.add("speech_fetchd_failures_total", type: "counter", help: "Failed requests by kind of failure.",
                 DaemonMetrics.failureLabels.map { ([("kind", $0)], Double(c.failures[$0] ?? 0)) })

        let cache = cacheSize()
        page.add("speech_fetchd_cache_bytes", type: "gauge", help: "Bytes allocated by the cache's models (looked at most every 30 s).",
                 [([], Double(cache.bytes))])
        page.add("speech_fetchd_cache_models", type: "gauge", help: "Model directories in the cache (looked at most every 30 s).",
                 [([], Double(cache.models))])
        return page.text
    }

    /// The spool's gauges now (SpoolGaugeReader); nil when the spool cannot be opened.
    private func spoolGauges() -> SpoolGauges? {
        gaugeReader.withLock { reader -> SpoolGauges? in
            if reader == nil {
                let settings = DownloadSettings.fromEnvironment(environment)
                reader = (try? Spool(base: cacheBase, node: settings.node, lease: settings.lease)).map(SpoolGaugeReader.init)
            }
            return reader?.look()
        }
    }

    /// The models' allocated bytes and count, walked again only after `cacheLookInterval`.
    private func cacheSize() -> (bytes: Int64, models: Int) {
        if let last = cacheLook.withLock({ $0 }), Date().timeIntervalSince(last.at) < DaemonMetrics.cacheLookInterval {
            return (last.bytes, last.models)
        }
        let root = CacheLocation.modelsRoot(base: cacheBase).path
        var models = 0
        for org in FileTree.names(root) where FileTree.isDirectory(root + "/" + org) {
            models += FileTree.names(root + "/" + org).filter { FileTree.isDirectory(root + "/" + org + "/" + $0) }.count
        }
        let bytes = FileTree.allocatedBytes(root)
        cacheLook.withLock { $0 = (Date(), bytes, models) }
        return (bytes, models)
    }
}
