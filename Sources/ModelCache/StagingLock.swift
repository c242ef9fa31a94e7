// StagingLock - the lease that makes one process the only writer of a staging file's sidecar.
//
// `.incomplete/<staging name>.lock` is created with O_EXCL and names its holder
// (`node@pid`); the holder refreshes its mtime. Anyone may break it when the holder is a dead
// process on this node, or when its mtime is older than the lease time on the filesystem's clock.
import Foundation

public struct LockOwner: Sendable, Equatable, CustomStringConvertible {
    public let node: String
    public let pid: Int32

    public init(node: String, pid: Int32 = getpid()) {
        self.node = node
        self.pid = pid
    }

    /// `node@pid`, the form every claim in the cache carries.
    public var description: String { "\(node)@\(pid)" }

    public init?(tag: String) {
        guard let at = tag.lastIndex(of: "@"), let pid = Int32(tag[tag.index(after: at)...]) else { return nil }
        node = String(tag[..<at])
        self.pid = pid
    }

    /// This machine's name: `--node`, else the host name; only letters, digits, `-`, `_`, `.`.
    public static func localNode(_ override: String? = nil) -> String {
        var name = override ?? ProcessInfo.processInfo.hostName
        name = String(name.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0) ? Character($0) : "_" })
        return name.isEmpty ? "node" : name
    }
}

public final class StagingLock: @unchecked Sendable {
    public let path: String
    public let owner: LockOwner

    private init(path: String, owner: LockOwner) {
        self.path = path
        self.owner = owner
    }

    /// Takes the lock for `repoPath` in `directory`, breaking a dead or expired one. Nil when a live holder has it.
    public static func acquire(_ repoPath: String, in directory: ModelDirectory, owner: LockOwner, lease: Double) -> StagingLock? {
        let staging = directory.stagingDirectory.path
        try? FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        let path = staging + "/" + StagingFile.stagingName(repoPath) + ".lock"
        for _ in 0..<3 {
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                let tag = Array(owner.description.utf8)
                _ = tag.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                fsync(fd)
                close(fd)
                return StagingLock(path: path, owner: owner)
            }
            guard errno == EEXIST else { return nil }
            guard isStale(path, localNode: owner.node, lease: lease, probe: staging) else { return nil }
            // Break it by renaming to a unique name first, so two breakers cannot both win.
            let grave = path + ".broken.\(owner.node).\(owner.pid).\(UInt32.random(in: 0...UInt32.max))"
            if rename(path, grave) == 0 { unlink(grave) }
        }
        return nil
    }

    /// True when the holder is a dead local process or the lock was not refreshed within `lease`,
    /// judged on the filesystem's clock: `probe` (a directory on the same filesystem) is touched
    /// and its mtime read back.
    public static func isStale(_ path: String, localNode: String, lease: Double, probe: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: path) else { return true }
        if let holder = LockOwner(tag: String(decoding: data, as: UTF8.self)), holder.node == localNode {
            return !(holder.pid > 0 && (kill(holder.pid, 0) == 0 || errno == EPERM))
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { return true }
        let mtime = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
        utimensat(AT_FDCWD, probe, nil, 0)  // the directory's mtime becomes the file server's "now"
        var pst = stat()
        guard lstat(probe, &pst) == 0 else { return false }
        let now = Double(pst.st_mtim.tv_sec) + Double(pst.st_mtim.tv_nsec) / 1e9
        return now - mtime > lease
    }

    public func refresh() { utimensat(AT_FDCWD, path, nil, AT_SYMLINK_NOFOLLOW) }

    /// Gives the lock up and removes the staging folder if nothing else is left in it.
    public func release() {
        unlink(path)
        rmdir((path as NSString).deletingLastPathComponent)
    }
}
