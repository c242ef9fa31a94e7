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
    /// lstat: the path itself, never a symlink's target.
    public static func facts(_ path: String) -> FileFacts? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return FileFacts(st)
    }

    public static func isDirectory(_ path: String) -> Bool { facts(path)?.isDirectory == true }

    /// Entry names of a directory (no `.`/`..`), sorted; empty when it cannot be read.
    public static func names(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// Allocated bytes of everything under `path` (or of `path` itself), each inode counted once.
    public static func allocatedBytes(_ path: String) -> Int64 {
        guard let top = facts(path) else { return 0 }
        guard top.isDirectory else { return top.allocated }
        var seen = Set<[UInt64]>()
        var total: Int64 = 0
        func walk(_ dir: String) {
            for name in names(dir) {
                let full = dir + "/" + name
                guard let f = facts(full) else { continue }
                if f.isDirectory { walk(full); continue }
                if seen.insert([f.device, f.inode]).inserted { total += f.allocated }
            }
        }
        walk(path)
        return total
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
