// DiskScan - the walks `speech cache` works from (staging grouped by file, files without the
// cache's bookkeeping, canonical paths), read-only hashing from a descriptor, and its wording.
import Digest
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

    /// The path with symlinks resolved when it exists, else standardized: how two spellings of
    /// one model directory are compared.
    static func canonical(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        return URL(fileURLWithPath: path).standardizedFileURL.path
    }

    /// True for 40 (git blob id) or 64 (sha256) lowercase hex digits.
    static func isHex(_ s: String, length: Int) -> Bool {
        s.utf8.count == length && s.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }

    /// `O_NOATIME` (Linux; Swift's Glibc does not export it): reading a file we do not own the
    /// metadata of must not move its access time.
    #if os(Linux) && (arch(x86_64) || arch(arm64) || arch(i386) || arch(arm))
    static let noAtime: Int32 = 0o1000000
    #else
    static let noAtime: Int32 = 0
    #endif

    /// Opens a file read-only for looking only: no symlink followed, atime left alone where allowed.
    static func openReadOnly(_ path: String) -> Int32 {
        let flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC
        if noAtime != 0 {
            let fd = open(path, flags | noAtime)
            if fd >= 0 || errno != EPERM { return fd }  // EPERM: not our file; read it plainly
        }
        return open(path, flags)
    }

    /// SHA-256 (hex) and byte count of the file behind `fd`.
    static func sha256(_ fd: Int32) -> (hex: String, bytes: Int64)? {
        var hasher = SHA256()
        var bytes: Int64 = 0
        guard FileIO.stream(fd, { hasher.update($0); bytes += Int64($0.count); return true }).errno == nil else { return nil }
        return (hasher.finalizeHex(), bytes)
    }

    /// The git blob id (SHA-1 of `blob <size>\0` + content) and byte count of the file behind `fd`.
    static func gitBlobID(_ fd: Int32, size: Int64) -> (hex: String, bytes: Int64)? {
        var hasher = SHA1()
        hasher.update(Data("blob \(size)\u{0}".utf8))
        var bytes: Int64 = 0
        guard FileIO.stream(fd, { hasher.update($0); bytes += Int64($0.count); return true }).errno == nil else { return nil }
        return (hasher.finalizeHex(), bytes)
    }

    /// "1 file", "3 files".
    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }

    /// A span of seconds, coarsely: 45 s, 12 min, 5 h, 3 d.
    static func formatAge(_ seconds: Double) -> String {
        let s = max(0, Int(seconds))
        if s < 120 { return "\(s) s" }
        if s < 7200 { return "\(s / 60) min" }
        if s < 172_800 { return "\(s / 3600) h" }
        return "\(s / 86400) d"
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
