// CacheCleanup - `speech cache rm` and `speech cache clean`: delete a model, or what crashed and
// abandoned transfers left behind, never anything a live transfer still uses.
import ByteUnits
import Foundation
import HubTypes
import ModelCache
import SharedFiles
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
        guard FileTree.isDirectory(directory.path) else {
            throw CacheAdminError.notCached(repo: id.description, directory: directory.path)
        }
        let spool = existingSpool()
        let flight = inFlight(directory, SpoolView(spool))
        guard flight.isEmpty else {
            throw CacheAdminError.inFlight(repo: id.description, directory: directory.path, reasons: flight.reasons)
        }
        let bytes = FileTree.allocatedBytes(directory.path)
        // Move it aside first (one rename), so no caller sees half a model; a lock taken between
        // the check and the rename is found in the moved directory and the move is undone.
        let parent = directory.url.deletingLastPathComponent().path
        let trash = parent + "/" + ModelLayout.removalName(ofModel: id.name, pid: getpid(), n: UInt32.random(in: 0...UInt32.max))
        if rename(directory.path, trash) == 0 {
            let late = liveLocks(ModelDirectory(URL(fileURLWithPath: trash)))
            if !late.isEmpty {
                rename(trash, directory.path)
                throw CacheAdminError.inFlight(repo: id.description, directory: directory.path,
                                               reasons: late.sorted { $0.key < $1.key }.map { "\($0.key) is being written (staging lock held by \($0.value))" })
            }
            guard FileTree.removeTree(trash) else {
                throw CacheAdminError.io(path: trash, operation: "delete", errno: errno)
            }
        } else {
            guard FileTree.removeTree(directory.path) else {
                throw CacheAdminError.io(path: directory.path, operation: "delete", errno: errno)
            }
        }
        rmdir(parent)  // the org folder, when this was its last model
        // Settled requests for the directory would make `speech wait` answer "ready".
        let key = FileTree.canonical(directory.path)
        let dropped = spool?.forgetSettledRequests { FileTree.canonical($0.modelDir) == key } ?? 0
        return RemovedModel(repo: id.description, directory: directory.url, bytesFreed: bytes, requestsDropped: dropped)
    }

    // MARK: clean

    /// Deletes what abandoned transfers left, when older than `olderThan` seconds (default 24 h):
    /// staging in `.incomplete/` whose lock no live process holds and that no active request or plan
    /// wants; half-finished `rm`s; and in the spool (`Spool.clean`) settled requests, plans whose
    /// model directory is gone, parts and jobs whose plan is gone, failure records nothing asks
    /// about, temp files of dead writers. Anything in flight is kept.
    public func clean(olderThan age: Double = 24 * 3600) -> CleanReport {
        var report = CleanReport()
        let spool = existingSpool()
        let view = SpoolView(spool)
        let now = spool?.serverNow() ?? Date().timeIntervalSince1970
        let cutoff = now - age

        for (repo, directory) in modelDirectories() {
            cleanStaging(repo, directory, flight: inFlight(directory, view), cutoff: cutoff, now: now, report: &report)
            // The manifest's temp files of writers that died between create and rename.
            for name in FileTree.names(directory.path) where ModelLayout.isManifestTemp(name) {
                removeIfOld(directory.path + "/" + name, cutoff: cutoff, reason: "\(repo): abandoned manifest temp file",
                            report: &report)
            }
        }
        // Model directories an interrupted `rm` moved aside.
        for org in FileTree.names(modelsRoot) where FileTree.isDirectory(modelsRoot + "/" + org) {
            for name in FileTree.names(modelsRoot + "/" + org) where ModelLayout.isRemoval(name) {
                removeIfOld("\(modelsRoot)/\(org)/\(name)", cutoff: cutoff, reason: "interrupted removal", report: &report)
            }
        }
        if let spool {
            report.removed += spool.clean(before: cutoff, activeRequests: Array(view.activeRequests.values.joined())) { plan in
                FileTree.facts(plan.modelDir) == nil && view.activeRequests[FileTree.canonical(plan.modelDir)] == nil
            }
        }
        return report
    }

    /// One model's `.incomplete/`: each staged file's entries go together, under its staging lock.
    private func cleanStaging(_ repo: RepoID, _ directory: ModelDirectory, flight: InFlight, cutoff: Double, now: Double,
                              report: inout CleanReport) {
        for (name, entries) in DiskScan.stagingGroups(directory).sorted(by: { $0.key < $1.key }) {
            let path = ModelLayout.repoPath(stagingName: name)
            let facts = entries.compactMap { FileTree.facts(directory.stagingPath($0)) }
            let newest = facts.map(\.mtime).max() ?? now
            guard newest < cutoff else { continue }
            if flight.touches(path) || flight.touches(stagingName: name) {
                let why = flight.lockedPaths[path].map { "its staging lock is held by \($0)" }
                    ?? "an active spool request or plan still wants it"
                report.kept.append("\(repo): \(path) (staged \(DurationText.coarse(now - newest)) ago; \(why))")
                continue
            }
            let bytes = facts.reduce(Int64(0)) { $0 + $1.allocated }
            // Taking the lock breaks a dead holder's and keeps everyone out while we delete.
            guard let lock = StagingLock.acquire(path, in: directory, owner: owner, lease: lease) else {
                report.kept.append("\(repo): \(path) (its staging lock is held by a live process)")
                continue
            }
            for entry in entries where !ModelLayout.isLock(entry, of: name) { unlink(directory.stagingPath(entry)) }
            lock.release()
            report.removed.append(CleanedItem(path: directory.stagingPath(name), bytes: bytes,
                                              reason: "\(repo): abandoned staging of \(path) (\(counted(entries.count, "file")), "
                                                  + "last written \(DurationText.coarse(now - newest)) ago)"))
        }
    }

    private func removeIfOld(_ path: String, cutoff: Double, reason: String, report: inout CleanReport) {
        if let bytes = FileTree.removeIfOlder(path, than: cutoff) { report.removed.append(CleanedItem(path: path, bytes: bytes, reason: reason)) }
    }
}
