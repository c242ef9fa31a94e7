// HubPrune - the size cap in a huggingface_hub cache (`prune --hf-cache`, `speech-fetchd
// --max-cache-size … --hf-cache`): each revision (`snapshots/<commit>`) is a unit of eviction,
// with the blobs no other revision of its repo points to. An evicted revision is renamed into
// `<repo folder>/.speech-fetch-evicted/` (huggingface_hub reads only the repo's `blobs/`,
// `snapshots/` and `refs/`), its blobs follow it, and the refs naming its commit are removed.
import ByteUnits
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool

extension CacheAdmin {
    /// `<repo folder>/.speech-fetch-evicted`: a huggingface_hub repo's evicted revisions.
    static let hubEvictedFolder = ".speech-fetch-evicted"

    /// Every revision of every repo folder of `hub`: the repo folders, the revisions as units of
    /// eviction, and the size on disk of every blob (what the cache holds, each blob once).
    func hubRevisions(_ hub: URL) -> (folders: [String], units: [PruneUnit], bytes: Int64, orphans: [OrphanBlob]) {
        var folders: [String] = []
        var units: [PruneUnit] = []
        var orphans: [OrphanBlob] = []
        var total: Int64 = 0
        for (_, folder, repo) in HubRepoFolder.all(in: hub) {
            guard let repo else { continue }
            folders.append(folder.path)
            var blobs: [String: FileFacts] = [:]
            for blob in FileTree.names(folder.blobsPath) {
                guard let facts = FileTree.facts(folder.blobPath(blob)), facts.isRegular else { continue }
                blobs[blob] = facts
                total += facts.allocated
            }
            let revisions = Self.revisionBlobs(folder)
            let pointedTo = revisions.values.reduce(into: Set<String>()) { $0.formUnion($1) }
            for (blob, facts) in blobs where !pointedTo.contains(blob) && !blob.hasSuffix(".incomplete") {
                orphans.append(OrphanBlob(repo: repo, folder: folder, name: blob, facts: facts))
            }
            for (commit, own) in revisions {
                let others = revisions.filter { $0.key != commit }.values.reduce(into: Set<String>()) { $0.formUnion($1) }
                let freed = own.subtracting(others)
                units.append(PruneUnit(repo: repo, directory: ModelDirectory(hubRepoFolder: folder.url, commit: commit),
                                       bytes: freed.reduce(0) { $0 + (blobs[$1]?.allocated ?? 0) },
                                       ownBlobs: freed.sorted(), blobUse: own.compactMap { blobs[$0]?.atime }.max()))
            }
        }
        return (folders, units, total, orphans)
    }

    /// Removes the orphan blobs (no revision of their repo points to them) while the cache is over
    /// its cap: each one modified longer ago than the grace period (huggingface_hub, and our
    /// import, write a blob before the pointer to it) and not being written (its blob lock held,
    /// or the repo in flight), each reported. Nothing reads an orphan, so it is unlinked at once.
    /// A fresh one is reported as kept, with why.
    func removeOrphans(_ orphans: [OrphanBlob], _ round: LeaseRound, _ options: PruneOptions, _ report: inout PruneReport) {
        var busy: [String: [String]] = [:]
        for orphan in orphans.sorted(by: { $0.facts.mtime < $1.facts.mtime }) where report.sizeAfter > options.maxSize {
            let name = PruneReport.name(orphan.repo.description, nil)
            let writes = busy[orphan.folder.path] ?? hubWrites(orphan.folder)
            busy[orphan.folder.path] = writes
            let age = (round.serverNow ?? orphan.facts.mtime) - orphan.facts.mtime
            let blob = "orphan blob \(orphan.name.prefix(12))…"
            if !writes.isEmpty || HubBlobLock.isHeld(orphan.folder.blobLockPath(orphan.name)) {
                report.kept.append(KeptModel(repo: name, revision: nil, bytes: orphan.facts.allocated,
                                             reason: "\(blob): huggingface_hub is writing into the repo"))
                continue
            }
            guard round.age(.found(orphan.facts.mtime), lease: options.grace) == .expired else {
                report.kept.append(KeptModel(repo: name, revision: nil, bytes: orphan.facts.allocated,
                                             reason: "\(blob) (no revision points to it) written \(DurationText.coarse(age)) ago, "
                                                + "within the grace period: a download may be about to point to it"))
                continue
            }
            let path = orphan.folder.blobPath(orphan.name)
            if !options.dryRun { guard unlink(path) == 0 || errno == ENOENT else { continue } }
            report.orphans.append(CleanedItem(path: path, bytes: orphan.facts.allocated,
                                              reason: "\(orphan.repo): no revision points to it, written \(DurationText.coarse(age)) ago"))
            report.sizeAfter -= orphan.facts.allocated
        }
    }

    /// Each snapshot of the repo folder with the names of the blobs its pointers lead to.
    static func revisionBlobs(_ folder: HubRepoFolder) -> [String: Set<String>] {
        var result: [String: Set<String>] = [:]
        for commit in folder.snapshots() { result[commit] = folder.blobNames(commit, maxDepth: ModelDirectory.maxWalkDepth) }
        return result
    }

    /// Renames `snapshots/<commit>` into `.speech-fetch-evicted/<now>-<commit>-<pid>-<n>/snapshot`,
    /// looks again (a staging lock or a use recorded meanwhile puts it back), then moves the blobs
    /// no remaining revision points to and the commit's `trees/` listing after it, and removes the
    /// refs that name the commit.
    func evictRevision(_ unit: PruneUnit, lastUse: Double, now: Double) -> Eviction {
        guard let commit = unit.revision else { return .refused("not a revision") }
        let hubFolder = unit.directory.hubFolder
        let trash = hubFolder.path + "/" + Self.hubEvictedFolder
        let destination = "\(trash)/\(Int(now))-\(commit)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for path in [trash, destination] where mkdir(path, 0o755) != 0 && errno != EEXIST {
            return .refused("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let snapshot = hubFolder.snapshotPath(commit)
        guard SharedFS.retry({ rename(snapshot, destination + "/snapshot") }) == 0 else {
            let reason = "cannot move \(snapshot): \(String(cString: strerror(errno)))"
            rmdir(destination)
            return .refused(reason)
        }
        let late = liveLocks(unit.directory)
        if !late.isEmpty || (unit.directory.lastUse() ?? lastUse) > lastUse {
            rename(destination + "/snapshot", snapshot)
            rmdir(destination)
            return .refused(late.isEmpty ? "used while it was being evicted" : "a transfer started while it was being evicted")
        }
        // Blobs a revision made meanwhile points to stay.
        let remaining = Self.revisionBlobs(hubFolder).values.reduce(into: Set<String>()) { $0.formUnion($1) }
        for blob in unit.ownBlobs where !remaining.contains(blob) {
            rename(hubFolder.blobPath(blob), destination + "/" + blob)
        }
        rename(hubFolder.treeListingPath(commit), destination + "/tree.json")
        unlink(unit.directory.useMarkerPath)
        removeRefs(naming: commit, under: hubFolder.refsPath)
        return .moved(to: destination)
    }

    /// Unlinks every ref file (`refs/main`, `refs/pr/1`, …) whose content is `commit`.
    private func removeRefs(naming commit: String, under directory: String, depth: Int = 0) {
        guard depth < 8 else { return }
        for name in FileTree.names(directory) {
            let path = directory + "/" + name
            guard let facts = FileTree.facts(path) else { continue }
            if facts.isDirectory {
                removeRefs(naming: commit, under: path, depth: depth + 1)
            } else if facts.isRegular, facts.size < 1024, let text = try? String(contentsOfFile: path, encoding: .utf8),
                      text.trimmingCharacters(in: .whitespacesAndNewlines) == commit {
                unlink(path)
            }
        }
    }
}

/// A blob of a huggingface_hub repo folder that no revision points to.
struct OrphanBlob {
    let repo: RepoID
    let folder: HubRepoFolder
    let name: String
    let facts: FileFacts
}
