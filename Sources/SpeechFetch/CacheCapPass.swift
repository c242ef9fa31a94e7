// CacheCapPass - `speech-fetchd --max-cache-size`'s pass: CacheAdmin's prune of the served cache
// base, with the model sizes remembered between passes, one log line per eviction; and a daemon
// process run with it. It stays here, a thin hook, because Daemon does not import CacheAdmin
// (they sit side by side, docs/architecture.md) and the prune needs the catalog's selections.
import ByteUnits
import CacheAdmin
import Daemon
import DaemonOptions
import Foundation
import ModelCatalog

extension FetchdProcess {
    /// `FetchdProcess.run` with CacheAdmin's prune as its size cap: what both executables run.
    public static func run(_ options: FetchdOptions, executable: String,
                           environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        try run(options, executable: executable, environment: environment, cacheCap: CacheCap.pruning)
    }
}

extension CacheCap {
    /// The size cap of `cacheBase`: a prune to `maxSize` bytes with `grace` seconds (default an
    /// hour), every `SPEECH_FETCH_PRUNE_SECONDS` (600) and after each finished request.
    public static func pruning(_ cacheBase: URL, maxSize: Int64, grace: Double?, hubCache: URL? = nil, environment: [String: String],
                               log: @escaping @Sendable (String) -> Void) -> CacheCap {
        let admin = CacheAdmin(cacheBase: cacheBase, environment: environment, knownSelections: ModelCatalog.fileSelections)
        let options = PruneOptions(maxSize: maxSize, grace: grace ?? PruneOptions.defaultGrace, hubCache: hubCache)
        let interval = environment["SPEECH_FETCH_PRUNE_SECONDS"].flatMap(Double.init).flatMap { $0 > 0 ? $0 : nil }
            ?? CacheCap.defaultInterval
        let sizes = ModelSizes()
        log("keeping the cache's models within \(ByteFormat.string(maxSize)) (grace \(String(format: "%g", options.grace / 3600)) h, "
            + "a look every \(Int(interval)) s and after each finished request)")
        return CacheCap(interval: interval) {
            let report = admin.prune(options, sizes: sizes)
            for model in report.evicted {
                let fate = model.waitsIn.map { "; it waits in \($0) for the grace period (a shared filesystem)" } ?? "; deleted"
                log("evicted \(PruneReport.name(model.repo, model.revision)) (\(ByteFormat.string(model.bytes))) to keep the cache within \(ByteFormat.string(maxSize))\(fate)")
            }
            for item in report.orphans { log("removed orphan blob \(item.path) (\(item.reason))") }
            for item in report.purged { log("deleted \(item.path) (\(item.reason))") }
            if report.overCap {
                log("the cache's models take \(ByteFormat.string(report.sizeAfter)), over the cap of \(ByteFormat.string(maxSize)): "
                    + report.kept.map { "\($0.repo) \($0.reason)" }.joined(separator: "; "))
            }
        }
    }
}

