// HubCache - a huggingface_hub cache on disk: where it is and its repo folders' names (one repo
// folder's layout is HubRepoFolder's; its blob locks are HubBlobLock's).
//
// The layout huggingface_hub reads (and writes itself):
//   <hub>/models--<org>--<name>/blobs/<etag>             file contents, named by sha256 (LFS) or git blob id
//   <hub>/models--<org>--<name>/snapshots/<commit>/<path>  relative symlinks to ../../blobs/<etag>
//   <hub>/models--<org>--<name>/refs/<revision>           the commit, no newline
//   <hub>/.locks/models--<org>--<name>/<etag>.lock        flock(2) locks, left in place
// speech-fetch adds only what huggingface_hub ignores: `.incomplete/` and `.speech-fetch.json` in
// the repo folder (its scan looks at `snapshots/` and `refs/` only).
import Digest
import Foundation
import HubTypes
import SharedFiles

public enum HubCache {
    /// huggingface_hub's own order: `HF_HUB_CACHE`, `HUGGINGFACE_HUB_CACHE`, `HF_HOME/hub`,
    /// `${XDG_CACHE_HOME:-~/.cache}/huggingface/hub`.
    public static func defaultDirectory(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        func set(_ name: String) -> String? {
            guard let v = env[name], !v.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
            return expandTilde(v, env)
        }
        if let dir = set("HF_HUB_CACHE") ?? set("HUGGINGFACE_HUB_CACHE") { return URL(fileURLWithPath: dir, isDirectory: true) }
        return homeDirectory(env).appendingPathComponent("hub", isDirectory: true)
    }

    /// `HF_HOME`, else `${XDG_CACHE_HOME:-~/.cache}/huggingface`.
    public static func homeDirectory(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let home = env["HF_HOME"], !home.trimmingCharacters(in: .whitespaces).isEmpty {
            return URL(fileURLWithPath: expandTilde(home, env), isDirectory: true)
        }
        let base = env["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((env["HOME"] ?? NSHomeDirectory()) + "/.cache")
        return URL(fileURLWithPath: base, isDirectory: true).appendingPathComponent("huggingface", isDirectory: true)
    }

    private static func expandTilde(_ path: String, _ env: [String: String]) -> String {
        guard path == "~" || path.hasPrefix("~/") else { return path }
        return (env["HOME"] ?? NSHomeDirectory()) + path.dropFirst()
    }

    /// A full commit id (40 lowercase hex digits), which names a snapshot without a ref.
    public static func isCommitHash(_ s: String) -> Bool {
        ContentHasher.isHex(s, length: 40)
    }

    /// Refuses a repo folder in which a folder speech-fetch writes into (or reads pointers from)
    /// is not a plain directory: `blobs/`, `snapshots/` (and `snapshots/<commit>/`), `refs/`,
    /// `trees/`, `.incomplete/`, and `<hub>/.locks/models--<org>--<name>/`. A symbolic link
    /// planted there would lead our writes (or a look-up's trust) out of the cache. Absent folders
    /// are fine: they are made as plain directories.
    /// - Throws: `CacheError.unsafeCacheEntry` naming the entry.
    public static func checkNoPlantedLinks(hub: URL, repo: RepoID, commit: String?) throws {
        let folder = HubRepoFolder(hub: hub, repo: repo)
        var entries = [HubRepoFolder.locksRoot(hub: hub), folder.locksPath]
        entries += [folder.blobsPath, folder.snapshotsPath, folder.refsPath, folder.treesPath, folder.path + "/" + ModelLayout.staging]
        if let commit, !commit.isEmpty { entries.append(folder.snapshotPath(commit)) }
        for path in entries {
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                let what = (st.st_mode & S_IFMT) == S_IFLNK ? "it is a symbolic link, which would lead writes out of the cache"
                                                           : "it is not a directory"
                throw CacheError.unsafeCacheEntry(path: path, reason: what)
            }
        }
    }

    /// Marks `hub` as a cache directory (the Cache Directory Tagging Standard's file, which
    /// huggingface_hub writes too), so backup tools skip it. Best effort.
    public static func tag(_ hub: URL) {
        let path = hub.path + "/CACHEDIR.TAG"
        guard access(path, F_OK) != 0 else { return }
        let text = "Signature: 8a477f597d28d172789f06886806bc55\n# A huggingface_hub cache, also written by speech-fetch.\n"
        try? FileManager.default.createDirectory(at: hub, withIntermediateDirectories: true)
        try? AtomicFile.write(Data(text.utf8), to: URL(fileURLWithPath: path))
    }
}
