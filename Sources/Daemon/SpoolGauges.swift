// SpoolGauges - the spool's state as `speech-fetchd --metrics` reports it, looked at once per
// scrape with no more operations than the figures need.
//
// A scrape does not read what `speech status` reads for progress (sidecars, final files, the
// node's in-flight bytes): the gauges are counts. One reader serves every scrape of a daemon and
// keeps what cannot have changed:
// - a request's record is parsed once (its id is a digest of what it asks; `Spool.requests`);
// - a request found done or failed stays so until the spool's generation moves (asking for it
//   again bumps the generation), so its markers are not looked at again meanwhile;
// - while the spool is idle (no request in flight, no range job ready, claimed or fetched) and
//   its generation has not moved, nothing the gauges count can change but the corrupt records:
//   the last look is reused for up to `idleReuse` seconds, and a scrape costs one `fstat` of
//   the generation file and a look at the supervisors.
import Foundation
import Spool

/// The spool's gauges at one look.
struct SpoolGauges: Equatable, Sendable {
    /// Requests by state: active, done, failed.
    var requests: [String: Int] = ["active": 0, "done": 0, "failed": 0]
    /// Range jobs of the requests' files: ready to claim, claimed, fetched and waiting to be spliced.
    var ready = 0
    var claimed = 0
    var fetched = 0
    /// Worker processes with a claim, per node.
    var busyWorkers: [String: Int] = [:]
    var supervisors = 0
    var corruptRecords = 0

    /// Nothing is moving: no request in flight and no range job anywhere.
    var isIdle: Bool { requests["active"] == 0 && ready == 0 && claimed == 0 && fetched == 0 }
}

/// Looks at one spool for successive scrapes (one caller at a time: `DaemonMetrics` holds it
/// under its lock).
final class SpoolGaugeReader: @unchecked Sendable {
    let spool: Spool
    /// The generation at the last look, and the requests found settled since it was last seen moving.
    private var generation: SpoolGeneration?
    private var settled: [String: RequestState] = [:]
    /// The file keys of each request's files (a record never changes under its id).
    private var keys: [String: [String]] = [:]
    private var last: (gauges: SpoolGauges, at: Date)?

    /// How long an idle spool's last look is reused while its generation stands still.
    static let idleReuse: TimeInterval = 30

    init(spool: Spool) { self.spool = spool }

    /// The gauges now.
    func look(now: Date = Date()) -> SpoolGauges {
        let generation = spool.heldGenerationLook()
        let moved = generation == nil || generation != self.generation
        self.generation = generation
        if moved { settled.removeAll() }
        if !moved, let last, last.gauges.isIdle, now.timeIntervalSince(last.at) < SpoolGaugeReader.idleReuse {
            var gauges = last.gauges
            gauges.supervisors = spool.liveSupervisors().count
            return gauges
        }
        var gauges = SpoolGauges()
        let requests = spool.requests()
        var fileKeys = Set<String>()
        var seen = Set<String>()
        for request in requests {
            seen.insert(request.id)
            let state = settled[request.id] ?? spool.state(of: request.id)
            switch state {
            case .active: gauges.requests["active", default: 0] += 1
            case .done: gauges.requests["done", default: 0] += 1
            case .failed: gauges.requests["failed", default: 0] += 1
            }
            if state != .active { settled[request.id] = state }
            let requestKeys = keys[request.id] ?? request.files.map {
                PlannedFile.key(modelDir: request.modelDir, path: $0.path, commit: request.commit)
            }
            keys[request.id] = requestKeys
            fileKeys.formUnion(requestKeys)
        }
        settled = settled.filter { seen.contains($0.key) }
        keys = keys.filter { seen.contains($0.key) }

        for job in spool.lookReadyJobs() ?? [] {
            if let range = PlannedFile.parseJob(job), fileKeys.contains(range.key) { gauges.ready += 1 }
        }
        var workers: [String: Set<Int32>] = [:]
        for claim in spool.claims() ?? [] where claim.isWorkers {  // junk names name no worker
            workers[claim.holder.node, default: []].insert(claim.holder.pid)
            if let range = claim.range, fileKeys.contains(range.key) { gauges.claimed += 1 }
        }
        gauges.busyWorkers = workers.mapValues(\.count)
        for (key, indices) in spool.partsByFile() where fileKeys.contains(key) { gauges.fetched += indices.count }
        gauges.supervisors = spool.liveSupervisors().count
        gauges.corruptRecords = spool.corruptRecords().count
        last = (gauges, now)
        return gauges
    }
}
