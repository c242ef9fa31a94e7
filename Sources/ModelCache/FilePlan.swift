// FilePlan - from a repo's file list and a selection to the exact files a call needs.
import Foundation
import HubTypes

public enum FilePlan {
    /// Files the selection picks, and the shard indexes among them.
    public static func select(_ files: [RepoFile], _ selection: FileSelection, repo: String) throws -> [RepoFile] {
        // Paths are compared as bytes (PathBytes): `é` in NFC and in NFD are two files.
        let paths = Set(files.map { PathBytes($0.path) })
        let unknown = selection.literalPaths.filter { !paths.contains(PathBytes($0)) }
        if !unknown.isEmpty { throw CacheError.notInRepo(repo: repo, paths: unknown) }
        return files.filter { selection.matches($0.path) }
    }

    /// Applies shard indexes: every shard an index names is needed; a `.safetensors` file in an
    /// index's folder that no index names (a consolidated copy) is dropped, unless
    /// `keepUnnamed`: a huggingface_hub cache holds the whole selection, as `hf download`
    /// fetches it, because huggingface_hub checks a snapshot against its tree listing
    /// (docs/cache-and-offline.md, "Sharing a huggingface_hub cache").
    public static func applyIndexes(_ indexes: [ShardIndex], selected: [RepoFile], all: [RepoFile],
                                    repo: String, keepUnnamed: Bool = false) throws -> [RepoFile] {
        guard !indexes.isEmpty else { return selected }
        let named = indexes.reduce(into: Set<String>()) { $0.formUnion($1.shards) }
        let namedPaths = Set(named.map(PathBytes.init))
        let byPath = Dictionary(all.map { (PathBytes($0.path), $0) }, uniquingKeysWith: { a, _ in a })
        let missing = named.filter { byPath[PathBytes($0)] == nil }.sorted()
        if !missing.isEmpty { throw CacheError.notInRepo(repo: repo, paths: missing) }
        var result = keepUnnamed ? selected : selected.filter { file in
            !indexes.contains { $0.governs(file.path) } || namedPaths.contains(PathBytes(file.path))
        }
        let have = Set(result.map { PathBytes($0.path) })
        result += named.filter { !have.contains(PathBytes($0)) }.sorted().compactMap { byPath[PathBytes($0)] }
        return result
    }
}
