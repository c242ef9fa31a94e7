// FileTree - what lstat says about a path, and the walks `speech cache` and the spool's clean-up
// use to count and delete: never following a symlink.
import Foundation

/// What lstat says about one path.
public struct FileFacts: Sendable {
    public let size: Int64
    /// Bytes the filesystem allocated (st_blocks × 512): what deleting the file frees.
    public let allocated: Int64
    public let links: Int
    public let device: UInt64
    public let inode: UInt64
    public let atime: Double
    public let mtime: Double
    public let mode: mode_t

    public var isRegular: Bool { (mode & S_IFMT) == S_IFREG }
    public var isDirectory: Bool { (mode & S_IFMT) == S_IFDIR }
    public var isSymlink: Bool { (mode & S_IFMT) == S_IFLNK }

    public init(_ st: stat) {
        size = Int64(st.st_size)
        allocated = Int64(st.st_blocks) * 512
        links = Int(st.st_nlink)
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        atime = Double(st.st_atim.tv_sec) + Double(st.st_atim.tv_nsec) / 1e9
        mtime = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
        mode = st.st_mode
    }
}

/// Looks and deletions that never follow a symlink.
public enum FileTree {
    /// lstat: the path itself, never a symlink's target. A stale handle is looked at again
    /// (`SharedFS.retry`): on a network filesystem it says nothing about the path, and a walk
    /// that passed over it would call a file of a complete model missing.
    public static func facts(_ path: String) -> FileFacts? {
        var st = stat()
        guard SharedFS.retry({ lstat(path, &st) }) == 0 else { return nil }
        return FileFacts(st)
    }

    public static func isDirectory(_ path: String) -> Bool { facts(path)?.isDirectory == true }

    /// Entry names of a directory (no `.`/`..`), sorted; empty when it cannot be read.
    public static func names(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// How deep a walk goes unless told: no path the kernel resolves (PATH_MAX, 4096 bytes) has
    /// more components.
    public static let deepestWalk = 2048

    /// Every entry under the directory `root` that is not a directory itself (files, links, and
    /// anything else), as (path relative to `root`, full path, lstat facts), in name order: the
    /// one walk of a tree. It never follows a link (a link to a folder is an entry, not a folder:
    /// no loop, no way out of the tree), visits each directory once (by device and inode: a bind
    /// mount of a parent), goes at most `maxDepth` folders deep, and passes over an entry (a
    /// folder with everything in it) for which `skip` (relative path, facts) is true.
    /// `followingRootLink`: `root` may itself be a link to a folder (a folder the user named);
    /// without it, a root that is a link is walked as nothing (a folder of a cache that must be
    /// its own).
    public static func walk(_ root: String, maxDepth: Int = deepestWalk, followingRootLink: Bool = false,
                            skip: (String, FileFacts) -> Bool = { _, _ in false }) -> [(path: String, fullPath: String, facts: FileFacts)] {
        var result: [(path: String, fullPath: String, facts: FileFacts)] = []
        var visited = Set<[UInt64]>()
        func walk(_ dir: String, _ prefix: String, depth: Int) {
            var followed = stat()
            let here = depth == 0 && followingRootLink ? (SharedFS.retry({ stat(dir, &followed) }) == 0 ? FileFacts(followed) : nil) : facts(dir)
            guard depth <= maxDepth, let here, here.isDirectory, visited.insert([here.device, here.inode]).inserted else { return }
            for name in names(dir) {
                let full = dir + "/" + name
                guard let facts = facts(full), !skip(prefix + name, facts) else { continue }
                if facts.isDirectory { walk(full, prefix + name + "/", depth: depth + 1) } else { result.append((prefix + name, full, facts)) }
            }
        }
        walk(root, "", depth: 0)
        return result
    }

    /// Allocated bytes of `files`, each inode counted once (hard links, within a model or with
    /// a huggingface_hub cache): what deleting them all frees.
    public static func allocatedBytes(of files: [FileFacts]) -> Int64 {
        var seen = Set<[UInt64]>()
        return files.reduce(Int64(0)) { sum, file in seen.insert([file.device, file.inode]).inserted ? sum + file.allocated : sum }
    }

    /// Allocated bytes of everything under `path` (or of `path` itself), each inode counted once.
    public static func allocatedBytes(_ path: String) -> Int64 {
        guard let top = facts(path) else { return 0 }
        guard top.isDirectory else { return top.allocated }
        return allocatedBytes(of: walk(path).map(\.facts))
    }

    /// Removes a file or a whole tree; true when nothing is left.
    @discardableResult
    public static func removeTree(_ path: String) -> Bool {
        guard let f = facts(path) else { return true }
        if !f.isDirectory { return unlink(path) == 0 || errno == ENOENT }
        try? FileManager.default.removeItem(atPath: path)
        return facts(path) == nil
    }

    /// Removes `path` (a whole tree) when it was last changed before `cutoff`. Returns the bytes
    /// it held; nil when it is newer, absent, or could not be removed.
    public static func removeIfOlder(_ path: String, than cutoff: Double) -> Int64? {
        guard let facts = facts(path), facts.mtime < cutoff else { return nil }
        let bytes = allocatedBytes(path)
        return removeTree(path) ? bytes : nil
    }
}
