// DiskScan - the walks `speech cache` works from (staging grouped by file, files without the
// cache's bookkeeping) and its wording.
import Foundation
import ModelCache
import SharedFiles

enum DiskScan {
    /// A model's `.incomplete/` entries grouped by the staging name they belong to
    /// (`ModelLayout.owner(ofEntry:)`).
    static func stagingGroups(_ directory: ModelDirectory) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for entry in FileTree.names(directory.stagingDirectory.path) { result[ModelLayout.owner(ofEntry: entry), default: []].append(entry) }
        return result
    }

    /// Every regular file under `root` as (relative path, facts) (`FileTree.walk`: no symlink
    /// followed, each folder once, at most a repo path deep below a model), without the
    /// top-level names `skipTopLevel` accepts.
    static func regularFiles(under root: String, skipTopLevel: (String) -> Bool = { _ in false }) -> [(path: String, facts: FileFacts)] {
        FileTree.walk(root, maxDepth: ModelDirectory.maxWalkDepth + 1, followingRootLink: true) { path, _ in !path.contains("/") && skipTopLevel(path) }
            .filter { $0.facts.isRegular }.map { ($0.path, $0.facts) }
    }
}
