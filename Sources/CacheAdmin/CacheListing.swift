// CacheListing - `speech cache ls`: every model of a cache base, its size on disk, state and last use.
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool

/// Where a cached model stands.
public enum CachedModelState: String, Sendable, Equatable {
    /// Everything the manifest lists (or the catalog's selection, for a catalog model) is on disk
    /// and nothing is staged.
    case complete
    /// Files the manifest lists are missing, or `.incomplete/` holds staging.
    case incomplete
    /// A live process holds a staging lock, or the spool has an active request or a plan for it.
    case inFlight = "in flight"
}

/// Which timestamp "last used" is.
public enum LastUseKind: String, Sendable, Equatable {
    /// The newest access time of its files, or its use marker's time (a load through speech-fetch).
    case accessed
    /// The newest modification time (written by a download; newer than every access time).
    case modified
}

/// One model directory of the cache base.
public struct CachedModel: Sendable {
    public let repo: String
    public let directory: URL
    public let state: CachedModelState
    /// Allocated bytes of its files (st_blocks), bookkeeping (`.speech-fetch.json`, `.incomplete/`) excluded.
    public let sizeOnDisk: Int64
    /// The part of `sizeOnDisk` in files with more than one hard link (shared with a
    /// huggingface_hub cache after `import-hf`): deleting the model does not free it.
    public let sharedBytes: Int64
    /// Allocated bytes under `.incomplete/`.
    public let stagedBytes: Int64
    public let fileCount: Int
    /// Files the manifest (or the catalog's selection) lists that are not on disk.
    public let missing: [String]
    /// Repo paths with a staging file or sidecar in `.incomplete/`.
    public let staged: [String]
    /// What holds it, when in flight.
    public let inFlight: [String]
    /// The commit the manifest records; nil without a manifest.
    public let commit: String?
    public let lastUsed: Date?
    public let lastUsedKind: LastUseKind?
}

extension CacheAdmin {
    /// Every model under `<base>/models/`, sorted by repo id.
    public func list() -> [CachedModel] {
        let view = SpoolView(existingSpool())
        return modelDirectories().map { describe($0.repo, $0.directory, view) }
    }

    /// One model; throws `CacheAdminError.notCached` when it has no directory.
    public func model(_ repo: String) throws -> CachedModel {
        let id = try RepoID(repo)
        let directory = directory(for: id)
        guard FileTree.isDirectory(directory.path) else {
            throw CacheAdminError.notCached(repo: id.description, directory: directory.path)
        }
        return describe(id, directory, SpoolView(existingSpool()))
    }

    func describe(_ repo: RepoID, _ directory: ModelDirectory, _ view: SpoolView) -> CachedModel {
        let files = DiskScan.regularFiles(under: directory.path, skipTopLevel: ModelLayout.isBookkeeping)
        return describe(repo, directory, view, counting: files, shownAs: directory.url, fileCount: files.count,
                        missing: missingFiles(repo, directory), commit: directory.readManifest()?.commit)
    }

    /// A model described from `files`, the files whose bytes it holds (each inode counted once),
    /// its staging and what of it is in flight.
    func describe(_ repo: RepoID, _ directory: ModelDirectory, _ view: SpoolView, counting files: [(path: String, facts: FileFacts)],
                  shownAs shown: URL, fileCount: Int, missing: [String], commit: String?) -> CachedModel {
        let size = FileTree.allocatedBytes(of: files.map(\.facts))
        let shared = FileTree.allocatedBytes(of: files.map(\.facts).filter { $0.links > 1 })
        // A load records itself in the model's use marker (ModelUse), at most once an hour.
        var newestAccess = SharedFS.mtime(directory.useMarkerPath).value ?? 0
        var newestChange = 0.0
        for (_, f) in files {
            newestAccess = max(newestAccess, f.atime)
            newestChange = max(newestChange, f.mtime)
        }
        let staged = DiskScan.stagingGroups(directory).compactMap { name, entries -> String? in
            ModelLayout.holdsStagedFile(name, entries: entries) ? ModelLayout.repoPath(stagingName: name) : nil
        }.sorted()
        let flight = inFlight(directory, view)
        let state: CachedModelState = !flight.isEmpty ? .inFlight : (missing.isEmpty && staged.isEmpty ? .complete : .incomplete)
        let used: (Date, LastUseKind)? = files.isEmpty ? nil
            : newestAccess > newestChange ? (Date(timeIntervalSince1970: newestAccess), .accessed)
            : (Date(timeIntervalSince1970: newestChange), .modified)
        return CachedModel(repo: repo.description, directory: shown, state: state, sizeOnDisk: size,
                           sharedBytes: shared, stagedBytes: FileTree.allocatedBytes(directory.stagingDirectory.path),
                           fileCount: fileCount, missing: missing, staged: staged, inFlight: flight.reasons,
                           commit: commit, lastUsed: used?.0, lastUsedKind: used?.1)
    }

    /// What the model lacks. A catalog download fetches only the files its entry loads, so for a
    /// repo of the model catalog it is complete when one entry's selection is all there; any repo
    /// is complete when every file its manifest lists is. Otherwise the shortest list is reported.
    func missingFiles(_ repo: RepoID, _ directory: ModelDirectory) -> [String] {
        var selections: [FileSelection] = []
        for selection in knownSelections[repo.description] ?? [] where !selections.contains(selection) {
            selections.append(selection)
        }
        if !selections.contains(.all) { selections.append(.all) }
        var best: [String]?
        for selection in selections {
            let missing = directory.missingOffline(selection, repo: repo.description).entries
            if missing.isEmpty { return [] }
            if best == nil || missing.count < best!.count { best = missing }
        }
        return best ?? []
    }
}

extension CacheAdmin {
    /// Every repo of a huggingface_hub cache (`hub`, default `HF_HUB_CACHE`, else `HF_HOME/hub`,
    /// else `~/.cache/huggingface/hub`), described at the commit `refs/main` names (else its
    /// newest snapshot). Nil when the folder does not exist.
    public func listHubCache(_ hub: URL? = nil) -> (hub: URL, models: [CachedModel])? {
        let hub = (hub ?? HubCache.defaultDirectory(environment)).standardizedFileURL
        guard FileTree.isDirectory(hub.path) else { return nil }
        let view = SpoolView(existingSpool())
        var models: [CachedModel] = []
        for (_, folder, repo) in HubRepoFolder.all(in: hub) {
            guard let repo, let commit = folder.commit(forRevision: "main") ?? folder.newestSnapshot() else { continue }
            models.append(describeHub(repo, ModelDirectory(hubRepoFolder: folder.url, commit: commit), view))
        }
        return (hub, models)
    }

    /// A huggingface_hub repo folder: its blobs' size on disk (each inode once), staging, state.
    func describeHub(_ repo: RepoID, _ directory: ModelDirectory, _ view: SpoolView) -> CachedModel {
        describe(repo, directory, view, counting: DiskScan.regularFiles(under: directory.hubFolder.blobsPath), shownAs: directory.filesURL,
                 fileCount: directory.listFiles().count, missing: directory.missingOffline(.all, repo: repo.description).entries,
                 commit: directory.hubCommit)
    }
}
