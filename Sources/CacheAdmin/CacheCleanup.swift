// CacheCleanup - `speech cache rm` and `speech cache clean`: delete a model, or what crashed and
// abandoned transfers left behind, never anything a live transfer still uses.
import Foundation
import HubClient
import ModelCache
import Spool

/// What `rm` deleted.
public struct RemovedModel: Sendable {
    public let repo: String
    public let directory: URL
    /// Allocated bytes of the directory (files still linked elsewhere are not freed).
    public let bytesFreed: Int64
    /// Settled spool requests for the directory that were dropped with it.
    public let requestsDropped: Int
}

/// One thing `clean` deleted.
public struct CleanedItem: Sendable, Equatable {
    public let path: String
    public let bytes: Int64
    public let reason: String
}

/// What `clean` deleted and what it left because it is in use.
public struct CleanReport: Sendable {
    public var removed: [CleanedItem] = []
    /// Old leftovers kept because a transfer still holds or wants them.
    public var kept: [String] = []
    public var bytesFreed: Int64 { removed.reduce(0) { $0 + $1.bytes } }
}

extension CacheAdmin {
    // MARK: rm

    /// Deletes the model directory of `repo`. Refuses with `CacheAdminError.inFlight` while a live
    /// process holds one of its staging locks or the spool has an active request or plan for it.
    @discardableResult
    public func remove(repo: String) throws -> RemovedModel {
        let id = try RepoID(repo)
        let directory = directory(for: id)
        guard DiskScan.isDirectory(directory.path) else {
            throw CacheAdminError.notCached(repo: id.description, directory: directory.path)
        }
        let spool = existingSpool()
        let flight = inFlight(directory, SpoolView(spool))
        guard flight.isEmpty else {
            throw CacheAdminError.inFlight(repo: id.description, directory: directory.path, reasons: flight.reasons)
        }
        let bytes = DiskScan.allocatedBytes(directory.path)
        // Move it aside first (one rename), so no caller sees half a model; a lock taken between
        // the check and the rename is found in the moved directory and the move is undone.
        let parent = directory.url.deletingLastPathComponent().path
        let trash = "\(parent)/.\(id.name).removing.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        if rename(directory.path, trash) == 0 {
            let late = liveLocks(ModelDirectory(URL(fileURLWithPath: trash)))
            if !late.isEmpty {
                rename(trash, directory.path)
                throw CacheAdminError.inFlight(repo: id.description, directory: directory.path,
                                               reasons: late.sorted { $0.key < $1.key }.map { "\($0.key) is being written (staging lock held by \($0.value))" })
            }
            guard DiskScan.removeTree(trash) else {
                throw CacheAdminError.io(path: trash, operation: "delete", errno: errno)
            }
        } else {
            guard DiskScan.removeTree(directory.path) else {
                throw CacheAdminError.io(path: directory.path, operation: "delete", errno: errno)
            }
        }
        rmdir(parent)  // the org folder, when this was its last model
        // Settled requests for the directory would make `speech wait` answer "ready".
        var dropped = 0
        if let spool {
            let key = DiskScan.canonical(directory.path)
            for request in spool.requests() where spool.state(of: request.id) != .active
                && DiskScan.canonical(request.modelDir) == key {
                dropRequest(request.id, spool: spool)
                dropped += 1
            }
        }
        return RemovedModel(repo: id.description, directory: directory.url, bytesFreed: bytes, requestsDropped: dropped)
    }

    private func dropRequest(_ id: String, spool: Spool) {
        unlink("\(spool.requestsDir)/\(id).json")
        unlink("\(spool.doneDir)/\(id)")
        unlink("\(spool.failedDir)/\(id).json")
    }

    // MARK: clean

    /// Deletes what abandoned transfers left, when older than `olderThan` seconds (default 24 h):
    /// staging in `.incomplete/` whose lock no live process holds and that no active request or plan
    /// wants; settled spool requests; plans whose model directory is gone; parts and jobs whose plan
    /// is gone; failure records nothing asks about; temp files of dead writers (`Spool.sweepTemp`);
    /// half-finished `rm`s. Anything in flight is kept.
    public func clean(olderThan age: Double = 24 * 3600) -> CleanReport {
        var report = CleanReport()
        let spool = existingSpool()
        let view = SpoolView(spool)
        let now = spool?.serverNow() ?? Date().timeIntervalSince1970
        let cutoff = now - age

        for (repo, directory) in modelDirectories() {
            cleanStaging(repo, directory, flight: inFlight(directory, view), cutoff: cutoff, now: now, report: &report)
            // The manifest's temp files of writers that died between create and rename.
            for name in DiskScan.names(directory.path) where name.hasPrefix("..speech-fetch.json.tmp.") {
                removeIfOld(directory.path + "/" + name, cutoff: cutoff, reason: "\(repo): abandoned manifest temp file",
                            report: &report)
            }
        }
        // Model directories an interrupted `rm` moved aside.
        for org in DiskScan.names(modelsRoot) where DiskScan.isDirectory(modelsRoot + "/" + org) {
            for name in DiskScan.names(modelsRoot + "/" + org) where name.hasPrefix(".") && name.contains(".removing.") {
                removeIfOld("\(modelsRoot)/\(org)/\(name)", cutoff: cutoff, reason: "interrupted removal", report: &report)
            }
        }
        if let spool { cleanSpool(spool, view: view, cutoff: cutoff, report: &report) }
        return report
    }

    /// One model's `.incomplete/`: each staged file's entries go together, under its staging lock.
    private func cleanStaging(_ repo: RepoID, _ directory: ModelDirectory, flight: InFlight, cutoff: Double, now: Double,
                              report: inout CleanReport) {
        let staging = directory.stagingDirectory.path
        for (name, entries) in StagingEntries.groups(staging).sorted(by: { $0.key < $1.key }) {
            let path = StagingEntries.repoPath(name)
            let facts = entries.compactMap { DiskScan.facts(staging + "/" + $0) }
            let newest = facts.map(\.mtime).max() ?? now
            guard newest < cutoff else { continue }
            if flight.touches(path) {
                let why = flight.lockedPaths[path].map { "its staging lock is held by \($0)" }
                    ?? "an active spool request or plan still wants it"
                report.kept.append("\(repo): \(path) (staged \(DiskScan.formatAge(now - newest)) ago; \(why))")
                continue
            }
            let bytes = facts.reduce(Int64(0)) { $0 + $1.allocated }
            // Taking the lock breaks a dead holder's and keeps everyone out while we delete.
            guard let lock = StagingLock.acquire(path, in: directory, owner: owner, lease: lease) else {
                report.kept.append("\(repo): \(path) (its staging lock is held by a live process)")
                continue
            }
            for entry in entries where entry != name + ".lock" { unlink(staging + "/" + entry) }
            lock.release()
            report.removed.append(CleanedItem(path: staging + "/" + name, bytes: bytes,
                                              reason: "\(repo): abandoned staging of \(path) (\(DiskScan.count(entries.count, "file")), "
                                                  + "last written \(DiskScan.formatAge(now - newest)) ago)"))
        }
    }

    private func cleanSpool(_ spool: Spool, view: SpoolView, cutoff: Double, report: inout CleanReport) {
        // Requests that are done or failed, settled before the cutoff, and their markers.
        var requestIDs = Set<String>()
        for name in DiskScan.names(spool.requestsDir) where name.hasSuffix(".json") {
            let id = String(name.dropLast(5))
            requestIDs.insert(id)
            let state = spool.state(of: id)
            guard state != .active else { continue }
            let marker = state == .done ? "\(spool.doneDir)/\(id)" : "\(spool.failedDir)/\(id).json"
            let settled = DiskScan.facts(marker)?.mtime ?? DiskScan.facts("\(spool.requestsDir)/\(name)")?.mtime ?? 0
            guard settled < cutoff else { continue }
            let paths = ["\(spool.requestsDir)/\(name)", "\(spool.doneDir)/\(id)", "\(spool.failedDir)/\(id).json"]
            let bytes = paths.reduce(Int64(0)) { $0 + (DiskScan.facts($1)?.allocated ?? 0) }
            dropRequest(id, spool: spool)
            let what = state == .done ? "done" : "failed"
            report.removed.append(CleanedItem(path: "\(spool.requestsDir)/\(name)", bytes: bytes,
                                              reason: "spool request \(id), \(what)"))
        }
        // Markers whose request is gone.
        for name in DiskScan.names(spool.doneDir) where !requestIDs.contains(name) {
            removeIfOld("\(spool.doneDir)/\(name)", cutoff: cutoff, reason: "done marker without a request", report: &report)
        }
        for name in DiskScan.names(spool.failedDir) where !requestIDs.contains(name.replacingOccurrences(of: ".json", with: "")) {
            removeIfOld("\(spool.failedDir)/\(name)", cutoff: cutoff, reason: "failure marker without a request", report: &report)
        }

        // Plans whose model directory no longer exists (and that no active request targets).
        for plan in spool.plannedFiles() {
            guard DiskScan.facts(plan.modelDir) == nil,
                  view.activeRequests[DiskScan.canonical(plan.modelDir)] == nil else { continue }
            var paths = ["\(spool.plansDir)/\(plan.key).json"]
            for index in 0..<plan.rangeCount {
                paths += ["\(spool.readyDir)/\(plan.jobName(index))", spool.partPath(plan, index)]
            }
            let bytes = paths.reduce(Int64(0)) { $0 + (DiskScan.facts($1)?.allocated ?? 0) }
            spool.dropPlan(plan)
            report.removed.append(CleanedItem(path: paths[0], bytes: bytes,
                                              reason: "plan of \(plan.repo) \(plan.file.path): \(plan.modelDir) no longer exists"))
        }
        let planned = Set(DiskScan.names(spool.plansDir).filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) })

        // Parts whose plan is gone belong to files that are final, failed or deleted.
        for name in DiskScan.names(spool.partsDir) where name.hasSuffix(".part") {
            guard let (key, _) = PlannedFile.parseJob(String(name.dropLast(5))), !planned.contains(key) else { continue }
            let path = "\(spool.partsDir)/\(name)"
            let bytes = DiskScan.facts(path)?.allocated ?? 0
            if unlink(path) == 0 { report.removed.append(CleanedItem(path: path, bytes: bytes, reason: "part whose plan is gone")) }
        }
        // Jobs whose plan is gone: ready ones (a planner publishes jobs before the plan, hence the
        // age) and claims of holders that are gone.
        for name in DiskScan.names(spool.readyDir) {
            guard let (key, _) = PlannedFile.parseJob(name), !planned.contains(key) else { continue }
            removeIfOld("\(spool.readyDir)/\(name)", cutoff: cutoff, reason: "ready job whose plan is gone", report: &report)
        }
        for entry in DiskScan.names(spool.claimedDir) {
            guard let at = entry.firstIndex(of: "@"), let (key, _) = PlannedFile.parseJob(String(entry[..<at])),
                  !planned.contains(key), let holder = LockOwner(tag: String(entry[entry.index(after: at)...])) else { continue }
            if holder.node == node && SpoolFS.processAlive(holder.pid) { continue }
            removeIfOld("\(spool.claimedDir)/\(entry)", cutoff: cutoff, reason: "claim whose plan is gone", report: &report)
        }
        // Failure records no active request asks about.
        var wanted = Set<String>()
        for request in view.activeRequests.values.joined() {
            for file in request.files {
                wanted.insert(PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit))
            }
        }
        for name in DiskScan.names(spool.failuresDir) where name.hasSuffix(".json") && !wanted.contains(String(name.dropLast(5))) {
            removeIfOld("\(spool.failuresDir)/\(name)", cutoff: cutoff, reason: "file failure no request asks about", report: &report)
        }

        // Unreadable records set aside in corrupt/ (kept for a look until they are old).
        for name in DiskScan.names(spool.corruptDir) {
            removeIfOld("\(spool.corruptDir)/\(name)", cutoff: cutoff, reason: "unreadable spool record set aside", report: &report)
        }

        // tmp/: files of dead local writers, or of other nodes after 36 h (the spool's own rule).
        let before = Dictionary(DiskScan.names(spool.tmp).compactMap { name in
            DiskScan.facts("\(spool.tmp)/\(name)").map { (name, $0.allocated) }
        }, uniquingKeysWith: { a, _ in a })
        if spool.sweepTemp() > 0 {
            let after = Set(DiskScan.names(spool.tmp))
            for (name, bytes) in before.sorted(by: { $0.key < $1.key }) where !after.contains(name) {
                report.removed.append(CleanedItem(path: "\(spool.tmp)/\(name)", bytes: bytes, reason: "temp file of a writer that is gone"))
            }
        }
    }

    private func removeIfOld(_ path: String, cutoff: Double, reason: String, report: inout CleanReport) {
        guard let facts = DiskScan.facts(path), facts.mtime < cutoff else { return }
        let bytes = DiskScan.allocatedBytes(path)
        if DiskScan.removeTree(path) { report.removed.append(CleanedItem(path: path, bytes: bytes, reason: reason)) }
    }
}
