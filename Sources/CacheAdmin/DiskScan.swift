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

    /// Every regular file under `root` as (relative path, facts), without following symlinks and
    /// without descending into top-level names `skipTopLevel` accepts.
    static func regularFiles(under root: String, skipTopLevel: (String) -> Bool = { _ in false }) -> [(path: String, facts: FileFacts)] {
        var result: [(String, FileFacts)] = []
        func walk(_ dir: String, _ prefix: String) {
            for name in FileTree.names(dir) {
                if prefix.isEmpty && skipTopLevel(name) { continue }
                let full = dir + "/" + name
                guard let f = FileTree.facts(full) else { continue }
                if f.isDirectory {
                    walk(full, prefix + name + "/")
                } else if f.isRegular {
                    result.append((prefix + name, f))
                }
            }
        }
        walk(root, "")
        return result
    }

}

extension DiskScan {
    /// Allocated bytes of `files`, each inode counted once (hard links within a model).
    static func sizeOnDisk(_ files: [(path: String, facts: FileFacts)]) -> Int64 {
        var seen = Set<[UInt64]>()
        return files.reduce(Int64(0)) { sum, file in
            seen.insert([file.facts.device, file.facts.inode]).inserted ? sum + file.facts.allocated : sum
        }
    }
}
