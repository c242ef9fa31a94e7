// HubPrune - the size cap in a huggingface_hub cache (`prune --hf-cache`, `speech-fetchd
// --max-cache-size … --hf-cache`): each revision (`snapshots/<commit>`) is a unit of eviction,
// with the blobs no other revision of its repo points to. An evicted revision is renamed into
// `<repo folder>/.speech-fetch-evicted/` (huggingface_hub reads only the repo's `blobs/`,
// `snapshots/` and `refs/`), its blobs follow it, and the refs naming its commit are removed.
import Foundation
import HubTypes
import ModelCache
import SharedFiles

extension CacheAdmin {
    /// `<repo folder>/.speech-fetch-evicted`: a huggingface_hub repo's evicted revisions.
    static let hubEvictedFolder = ".speech-fetch-evicted"

    /// Every revision of every repo folder of `hub`: the repo folders, the revisions as units of
    /// eviction, and the size on disk of every blob (what the cache holds, each blob once).
    func hubRevisions(_ hub: URL) -> (folders: [String], units: [PruneUnit], bytes: Int64) {
        var folders: [String] = []
        var units: [PruneUnit] = []
        var total: Int64 = 0
        for name in FileTree.names(hub.path) where name.hasPrefix("models--") {
            let parts = name.dropFirst("models--".count).components(separatedBy: "--")
            guard parts.count == 2, let repo = try? RepoID(parts.joined(separator: "/")) else { continue }
            let folder = hub.appendingPathComponent(name, isDirectory: true)
            folders.append(folder.path)
            var blobs: [String: FileFacts] = [:]
            for blob in FileTree.names(folder.path + "/blobs") {
                guard let facts = FileTree.facts(folder.path + "/blobs/" + blob), facts.isRegular else { continue }
                blobs[blob] = facts
                total += facts.allocated
            }
            let revisions = Self.revisionBlobs(folder)
            for (commit, own) in revisions {
                let others = revisions.filter { $0.key != commit }.values.reduce(into: Set<String>()) { $0.formUnion($1) }
                let freed = own.subtracting(others)
                units.append(PruneUnit(repo: repo, directory: ModelDirectory(hubRepoFolder: folder, commit: commit),
                                       bytes: freed.reduce(0) { $0 + (blobs[$1]?.allocated ?? 0) },
                                       ownBlobs: freed.sorted(), blobUse: own.compactMap { blobs[$0]?.atime }.max()))
            }
        }
        return (folders, units, total)
    }

    /// Each snapshot of the repo folder with the names of the blobs its pointers lead to.
    static func revisionBlobs(_ folder: URL) -> [String: Set<String>] {
        var result: [String: Set<String>] = [:]
        for commit in FileTree.names(folder.path + "/snapshots") where HubCache.isCommitHash(commit) {
            let directory = ModelDirectory(hubRepoFolder: folder, commit: commit)
            var blobs = Set<String>()
            for path in directory.listFiles() {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory.finalPath(path)) else { continue }
                let parent = URL(fileURLWithPath: target).deletingLastPathComponent().lastPathComponent
                if parent == "blobs" { blobs.insert(URL(fileURLWithPath: target).lastPathComponent) }
            }
            result[commit] = blobs
        }
        return result
    }

    /// Renames `snapshots/<commit>` into `.speech-fetch-evicted/<now>-<commit>-<pid>-<n>/snapshot`,
    /// looks again (a staging lock or a use recorded meanwhile puts it back), then moves the blobs
    /// no remaining revision points to and the commit's `trees/` listing after it, and removes the
    /// refs that name the commit. Nil when evicted, else why not.
    func evictRevision(_ unit: PruneUnit, lastUse: Double, now: Double) -> String? {
        guard let commit = unit.revision else { return "not a revision" }
        let folder = unit.directory.path
        let trash = folder + "/" + Self.hubEvictedFolder
        let destination = "\(trash)/\(Int(now))-\(commit)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for path in [trash, destination] where mkdir(path, 0o755) != 0 && errno != EEXIST {
            return "cannot create \(path): \(String(cString: strerror(errno)))"
        }
        let snapshot = folder + "/snapshots/" + commit
        guard SharedFS.retry({ rename(snapshot, destination + "/snapshot") }) == 0 else {
            let reason = "cannot move \(snapshot): \(String(cString: strerror(errno)))"
            rmdir(destination)
            return reason
        }
        let late = liveLocks(unit.directory)
        if !late.isEmpty || (unit.directory.lastUse() ?? lastUse) > lastUse {
            rename(destination + "/snapshot", snapshot)
            rmdir(destination)
            return late.isEmpty ? "used while it was being evicted" : "a transfer started while it was being evicted"
        }
        // Blobs a revision made meanwhile points to stay.
        let remaining = Self.revisionBlobs(unit.directory.url).values.reduce(into: Set<String>()) { $0.formUnion($1) }
        for blob in unit.ownBlobs where !remaining.contains(blob) {
            rename(folder + "/blobs/" + blob, destination + "/" + blob)
        }
        rename(folder + "/trees/" + commit + ".json", destination + "/tree.json")
        unlink(unit.directory.useMarkerPath)
        removeRefs(naming: commit, under: folder + "/refs")
        return nil
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
