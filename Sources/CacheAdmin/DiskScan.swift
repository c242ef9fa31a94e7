// DiskScan - the filesystem facts `speech cache` works from: lstat without following links,
// allocated bytes, walks that skip the cache's bookkeeping, and read-only hashing from a descriptor.
import Digest
import Foundation

/// What lstat says about one path.
struct FileFacts: Sendable {
    let size: Int64
    /// Bytes the filesystem allocated (st_blocks × 512): what deleting the file frees.
    let allocated: Int64
    let links: Int
    let device: UInt64
    let inode: UInt64
    let atime: Double
    let mtime: Double
    let mode: mode_t

    var isRegular: Bool { (mode & S_IFMT) == S_IFREG }
    var isDirectory: Bool { (mode & S_IFMT) == S_IFDIR }
    var isSymlink: Bool { (mode & S_IFMT) == S_IFLNK }

    init(_ st: stat) {
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

enum DiskScan {
    /// lstat: the path itself, never a symlink's target.
    static func facts(_ path: String) -> FileFacts? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return FileFacts(st)
    }

    static func isDirectory(_ path: String) -> Bool { facts(path)?.isDirectory == true }

    /// Entry names of a directory (no `.`/`..`), sorted; empty when it cannot be read.
    static func names(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// True for the names a model directory keeps for itself: the manifest (and its temp files)
    /// and `.incomplete/`. RepoPath refuses every such name as a repo path.
    static func isBookkeeping(_ topLevelName: String) -> Bool {
        topLevelName.hasPrefix(".incomplete") || topLevelName.hasPrefix(".speech-fetch")
            || topLevelName.hasPrefix("..speech-fetch")  // AtomicFile's temp name of the manifest
    }

    /// Every regular file under `root` as (relative path, facts), without following symlinks and
    /// without descending into top-level names `skipTopLevel` accepts.
    static func regularFiles(under root: String, skipTopLevel: (String) -> Bool = { _ in false }) -> [(path: String, facts: FileFacts)] {
        var result: [(String, FileFacts)] = []
        func walk(_ dir: String, _ prefix: String) {
            for name in names(dir) {
                if prefix.isEmpty && skipTopLevel(name) { continue }
                let full = dir + "/" + name
                guard let f = facts(full) else { continue }
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

    /// Allocated bytes of everything under `path` (or of `path` itself), each inode counted once.
    static func allocatedBytes(_ path: String) -> Int64 {
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

    /// The path with symlinks resolved when it exists, else standardized: how two spellings of
    /// one model directory are compared.
    static func canonical(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        return URL(fileURLWithPath: path).standardizedFileURL.path
    }

    /// Removes a file or a whole tree; true when nothing is left.
    @discardableResult
    static func removeTree(_ path: String) -> Bool {
        guard let f = facts(path) else { return true }
        if !f.isDirectory { return unlink(path) == 0 || errno == ENOENT }
        try? FileManager.default.removeItem(atPath: path)
        return facts(path) == nil
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

    /// Reads the whole file behind `fd` with pread in 1 MiB pieces; false on a read error.
    static func stream(_ fd: Int32, _ body: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        var offset: off_t = 0
        while true {
            let n = pread(fd, buffer.baseAddress, size, offset)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            if n == 0 { return true }
            guard body(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) else { return false }
            offset += off_t(n)
        }
    }

    /// SHA-256 (hex) and byte count of the file behind `fd`.
    static func sha256(_ fd: Int32) -> (hex: String, bytes: Int64)? {
        var hasher = SHA256()
        var bytes: Int64 = 0
        guard stream(fd, { hasher.update($0); bytes += Int64($0.count); return true }) else { return nil }
        return (hasher.finalizeHex(), bytes)
    }

    /// The git blob id (SHA-1 of `blob <size>\0` + content) and byte count of the file behind `fd`.
    static func gitBlobID(_ fd: Int32, size: Int64) -> (hex: String, bytes: Int64)? {
        var hasher = SHA1()
        hasher.update(Data("blob \(size)\u{0}".utf8))
        var bytes: Int64 = 0
        guard stream(fd, { hasher.update($0); bytes += Int64($0.count); return true }) else { return nil }
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

/// `.incomplete/` entries grouped by the file they stage: `<name>`, `<name>.sidecar.json`,
/// `<name>.lock`, a sidecar's temp file `.<name>.sidecar.json.tmp.*`, a broken lock
/// `<name>.lock.broken.*`, and an import's temp link `<name>.import.*`.
public enum StagingEntries {
    /// Works on UTF-8 bytes, as `StagingFile.stagingName` writes them (a name may begin with a
    /// combining mark, which Swift's characters would join to the dot before it).
    public static func stagingName(of entry: String) -> String {
        let bytes = Array(entry.utf8)
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        func find(_ marker: String, from start: Int = 0) -> Int? {
            let m = Array(marker.utf8)
            guard bytes.count >= m.count + start else { return nil }
            return (start...(bytes.count - m.count)).first { bytes[$0...].starts(with: m) }
        }
        for suffix in [".lock", ".sidecar.json"] where bytes.count >= suffix.utf8.count && bytes.suffix(suffix.utf8.count).elementsEqual(suffix.utf8) {
            return text(0..<(bytes.count - suffix.utf8.count))
        }
        for marker in [".lock.broken.", ".import."] {
            if let at = find(marker) { return text(0..<at) }
        }
        if bytes.first == UInt8(ascii: "."), let at = find(".sidecar.json.tmp.", from: 1) { return text(1..<at) }
        return entry
    }

    /// Staging name → the entries that belong to it.
    static func groups(_ stagingDirectory: String) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for entry in DiskScan.names(stagingDirectory) { result[stagingName(of: entry), default: []].append(entry) }
        return result
    }

    /// `a%2Fb%25c%2Elock` → `a/b%c.lock`: the inverse of `StagingFile.stagingName`.
    public static func repoPath(_ stagingName: String) -> String {
        let bytes = Array(stagingName.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let code = bytes[i] == UInt8(ascii: "%") ? String(decoding: bytes[i..<min(i + 3, bytes.count)], as: UTF8.self) : ""
            switch code {
            case "%2F": out.append(UInt8(ascii: "/")); i += 3
            case "%25": out.append(UInt8(ascii: "%")); i += 3
            case "%2E": out.append(UInt8(ascii: ".")); i += 3
            default: out.append(bytes[i]); i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
