// RepoCatalog - finds repos under the test Hub's root and turns each into a snapshot.
// The folder is walked again on every look-up (a walk is only readdir and stat), so files
// added or rewritten on disk are seen at once; content digests are cached per
// (path, size, mtime, inode), so a big file is hashed once.
import Digest
import Foundation
import SharedFiles

final class RepoCatalog: @unchecked Sendable {
    /// Extensions the Hub stores in LFS whatever their size.
    static let lfsExtensions: Set<String> = [
        "safetensors", "bin", "pt", "pth", "onnx", "gguf", "npz", "npy", "mlmodel", "weight", "msgpack", "h5", "model",
    ]
    /// Files this large go to LFS whatever their extension.
    static let lfsThreshold = 1 << 20
    /// Suffix of the files `RepoWriter` is still writing; never part of a repo.
    static let partialSuffix = ".testhub-partial"

    private struct DigestKey: Hashable {
        let path: String
        let size: Int
        let mtimeSeconds: Int
        let mtimeNanoseconds: Int
        let inode: UInt64
    }

    private struct Digests {
        let sha256: String
        /// Only for files stored in git (not LFS): their blob id.
        let blobSHA1: String?
    }

    let root: URL
    private let lock = NSLock()
    /// Per disk path, the digests of its last seen version (an older version is forgotten).
    private var digestCache: [String: (key: DigestKey, digests: Digests)] = [:]

    init(root: URL) {
        self.root = root.standardizedFileURL
    }

    static func isLFS(path: String, size: Int) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        if let dot = name.lastIndex(of: "."), lfsExtensions.contains(name[name.index(after: dot)...].lowercased()) {
            return true
        }
        return size >= lfsThreshold
    }

    /// The repo `org/name` as it is on disk now; nil when there is no such folder.
    func snapshot(of repo: String) -> ServedTree? {
        let parts = repo.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") }) else { return nil }
        let dir = root.path + "/" + repo
        var st = stat()
        guard stat(dir, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return lock.withLock {
            var nodes: [TreeNode] = []
            var newest = 0.0
            _ = walk(diskDir: dir, prefix: "", into: &nodes, newest: &newest)
            let modified = newest > 0 ? Date(timeIntervalSince1970: newest) : Date()
            return ServedTree(repo: repo, nodes: nodes, lastModified: modified)
        }
    }

    /// Appends the entries below `diskDir` depth first; returns the directory's own oid, or
    /// nil when it holds no file (git has no empty directories).
    private func walk(diskDir: String, prefix: String, into nodes: inout [TreeNode], newest: inout Double) -> String? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: diskDir) else { return nil }
        var children: [String] = []
        for name in names.sorted() {
            if name == ".git" || name.hasSuffix(RepoCatalog.partialSuffix) { continue }
            let diskPath = diskDir + "/" + name
            let path = prefix + name
            var st = stat()
            guard stat(diskPath, &st) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                let slot = nodes.count
                nodes.append(.directory(ServedDirectory(path: path, oid: "")))
                if let oid = walk(diskDir: diskPath, prefix: path + "/", into: &nodes, newest: &newest) {
                    nodes[slot] = .directory(ServedDirectory(path: path, oid: oid))
                    children.append("tree \(name) \(oid)")
                } else {
                    nodes.remove(at: slot)
                }
            case S_IFREG:
                guard let file = describe(path: path, diskPath: diskPath, st: st) else { continue }
                nodes.append(.file(file))
                children.append("blob \(name) \(file.gitOid)")
                newest = max(newest, Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
            default:
                continue
            }
        }
        guard !children.isEmpty else { return nil }
        var h = SHA1()
        h.update(text: children.joined(separator: "\n"))
        return h.finalizeHex()
    }

    private func describe(path: String, diskPath: String, st: stat) -> ServedFile? {
        let size = Int(st.st_size)
        let key = DigestKey(path: diskPath, size: size, mtimeSeconds: Int(st.st_mtim.tv_sec),
                            mtimeNanoseconds: Int(st.st_mtim.tv_nsec), inode: UInt64(st.st_ino))
        let lfs = RepoCatalog.isLFS(path: path, size: size)
        let digests: Digests
        if let cached = digestCache[diskPath], cached.key == key, lfs || cached.digests.blobSHA1 != nil {
            digests = cached.digests
        } else {
            guard let fresh = RepoCatalog.hash(diskPath: diskPath, size: size, gitBlob: !lfs) else { return nil }
            digestCache[diskPath] = (key, fresh)
            digests = fresh
        }
        if lfs {
            let pointer = LFSPointer.text(sha256: digests.sha256, size: size)
            return ServedFile(path: path, diskPath: diskPath, size: size, sha256: digests.sha256,
                            gitOid: LFSPointer.gitBlobID(of: Data(pointer.utf8)), isLFS: true,
                            pointerSize: pointer.utf8.count)
        }
        return ServedFile(path: path, diskPath: diskPath, size: size, sha256: digests.sha256,
                        gitOid: digests.blobSHA1 ?? "", isLFS: false, pointerSize: 0)
    }

    /// SHA-256 of the content and, when `gitBlob`, its git blob SHA-1, in one pass of 1 MiB reads.
    private static func hash(diskPath: String, size: Int, gitBlob: Bool) -> Digests? {
        let fd = open(diskPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var sha256 = SHA256()
        var sha1 = SHA1()
        sha1.update(text: "blob \(size)\u{0}")
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < size {
            let n = FileIO.restartingAfterSignal { pread(fd, buffer.baseAddress, min(buffer.count, size - offset), off_t(offset)) }
            guard n > 0 else { return nil }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0 ..< n])
            sha256.update(chunk)
            if gitBlob { sha1.update(chunk) }
            offset += n
        }
        return Digests(sha256: sha256.finalizeHex(), blobSHA1: gitBlob ? sha1.finalizeHex() : nil)
    }
}

/// The text git stores in place of an LFS file.
enum LFSPointer {
    static func text(sha256: String, size: Int) -> String {
        "version https://git-lfs.github.com/spec/v1\noid sha256:\(sha256)\nsize \(size)\n"
    }

    static func gitBlobID(of content: Data) -> String {
        var h = SHA1()
        h.update(text: "blob \(content.count)\u{0}")
        h.update(content)
        return h.finalizeHex()
    }
}
