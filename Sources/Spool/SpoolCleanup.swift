// SpoolCleanup - the spool's half of `speech cache rm` and `speech cache clean`: settled requests
// dropped, and what finished, failed and abandoned transfers left behind removed, never anything
// a live transfer still uses (docs/protocol.md, "Administration").
import Foundation
import ModelCache
import SharedFiles

/// One thing `clean` deleted.
public struct CleanedItem: Sendable, Equatable {
    public let path: String
    public let bytes: Int64
    public let reason: String

    public init(path: String, bytes: Int64, reason: String) {
        self.path = path
        self.bytes = bytes
        self.reason = reason
    }
}

extension Spool {
    /// Drops a request with its done or failed marker.
    public func forgetRequest(_ id: String) {
        unlink(layout.request(id))
        unlink(layout.doneMarker(id))
        unlink(layout.failedMarker(id))
        bumpGeneration()  // a supervisor that remembered it settled or parsed looks again
    }

    /// Drops the settled (done or failed) requests `matches` accepts. Returns how many.
    public func forgetSettledRequests(where matches: (SpoolRequest) -> Bool) -> Int {
        var dropped = 0
        for request in requests() where state(of: request.id) != .active && matches(request) {
            forgetRequest(request.id)
            dropped += 1
        }
        return dropped
    }

    /// Removes what is left in the spool from before `cutoff` (seconds, on the filesystem's
    /// clock): settled requests and their markers, markers without a request, plans of files whose
    /// model directory is gone (`directoryIsGone`), parts and jobs whose plan is gone, failure
    /// records none of `activeRequests` asks about, records set aside in `corrupt/`, and temp files
    /// of writers that are gone (`sweepTemp`). Parts whose plan is gone go whatever their age.
    public func clean(before cutoff: Double, activeRequests: [SpoolRequest],
                      directoryIsGone: (PlannedFile) -> Bool) -> [CleanedItem] {
        var removed: [CleanedItem] = []
        func removeIfOld(_ path: String, _ reason: String) {
            if let bytes = FileTree.removeIfOlder(path, than: cutoff) { removed.append(CleanedItem(path: path, bytes: bytes, reason: reason)) }
        }
        func names(_ folder: SpoolLayout.Folder) -> [String] { (SharedFS.names(layout.path(folder)) ?? []).sorted() }
        func bytes(_ paths: [String]) -> Int64 { paths.reduce(Int64(0)) { $0 + (FileTree.facts($1)?.allocated ?? 0) } }

        // Requests that are done or failed, settled before the cutoff, and their markers.
        var requestIDs = Set<String>()
        for id in names(.requests).compactMap(SpoolLayout.recordID) {
            requestIDs.insert(id)
            let state = state(of: id)
            guard state != .active else { continue }
            let marker = state == .done ? layout.doneMarker(id) : layout.failedMarker(id)
            let settled = FileTree.facts(marker)?.mtime ?? FileTree.facts(layout.request(id))?.mtime ?? 0
            guard settled < cutoff else { continue }
            let size = bytes([layout.request(id), layout.doneMarker(id), layout.failedMarker(id)])
            forgetRequest(id)
            removed.append(CleanedItem(path: layout.request(id), bytes: size,
                                       reason: "spool request \(id), \(state == .done ? "done" : "failed")"))
        }
        // Markers whose request is gone.
        for name in names(.done) where !requestIDs.contains(name) {
            removeIfOld(layout.path(.done, name), "done marker without a request")
        }
        for name in names(.failed) where !requestIDs.contains(SpoolLayout.recordID(name) ?? name) {
            removeIfOld(layout.path(.failed, name), "failure marker without a request")
        }

        // Plans whose model directory no longer exists (and that no active request targets).
        for plan in plannedFiles() where directoryIsGone(plan) {
            let size = bytes([layout.plan(plan.key)] + (0..<plan.rangeCount).flatMap { [layout.ready(plan.jobName($0)), layout.part(plan.jobName($0))] })
            dropPlan(plan)
            removed.append(CleanedItem(path: layout.plan(plan.key), bytes: size,
                                       reason: "plan of \(plan.repo) \(plan.file.path): \(plan.modelDir) no longer exists"))
        }
        let planned = Set(names(.plans).compactMap(SpoolLayout.recordID))

        // Parts whose plan is gone belong to files that are final, failed or deleted.
        for name in names(.parts) {
            guard let job = SpoolLayout.partJob(name), let (key, _) = PlannedFile.parseJob(job), !planned.contains(key) else { continue }
            let path = layout.path(.parts, name)
            let size = bytes([path])
            if unlink(path) == 0 { removed.append(CleanedItem(path: path, bytes: size, reason: "part whose plan is gone")) }
        }
        // Jobs whose plan is gone: ready ones (a planner publishes jobs before the plan, hence the
        // age) and claims of holders that are gone.
        for name in names(.ready) {
            guard let (key, _) = PlannedFile.parseJob(name), !planned.contains(key) else { continue }
            removeIfOld(layout.ready(name), "ready job whose plan is gone")
        }
        for entry in names(.claimed) {
            guard let claim = SpoolLayout.Claim(entry), let (key, _) = claim.range, !planned.contains(key) else { continue }
            if claim.holder.node == owner.node && LeaseJudge.processRunning(claim.holder.pid) { continue }
            removeIfOld(layout.path(.claimed, entry), "claim whose plan is gone")
        }
        // Failure records no active request asks about.
        var wanted = Set<String>()
        for request in activeRequests {
            for file in request.files {
                wanted.insert(PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit))
            }
        }
        for key in names(.failures).compactMap(SpoolLayout.recordID) where !wanted.contains(key) {
            removeIfOld(layout.failure(key), "file failure no request asks about")
        }

        // Unreadable records set aside in corrupt/ (kept for a look until they are old).
        for name in names(.corrupt) {
            removeIfOld(layout.path(.corrupt, name), "unreadable spool record set aside")
        }

        // tmp/: files of dead local writers, or of other nodes after 36 h (the spool's own rule).
        let before = Dictionary(names(.tmp).compactMap { name in
            FileTree.facts(layout.path(.tmp, name)).map { (name, $0.allocated) }
        }, uniquingKeysWith: { a, _ in a })
        if sweepTemp() > 0 {
            let after = Set(names(.tmp))
            for (name, size) in before.sorted(by: { $0.key < $1.key }) where !after.contains(name) {
                removed.append(CleanedItem(path: layout.path(.tmp, name), bytes: size, reason: "temp file of a writer that is gone"))
            }
        }
        return removed
    }
}
