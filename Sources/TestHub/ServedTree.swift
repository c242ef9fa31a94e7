// ServedTree - one repo folder as the Hub would present it at one commit: its files
// with their digests, its directories, and the commit id derived from all of them.
import Digest
import Foundation

/// A file of a repo, with what the Hub says about it.
struct ServedFile: Sendable {
    /// Path inside the repo, `/`-separated.
    let path: String
    /// Where the bytes are on disk.
    let diskPath: String
    let size: Int
    /// SHA-256 of the content, lowercase hex (the LFS oid, and the ETag the CDN uses).
    let sha256: String
    /// Git object id: the blob SHA-1 of the content, or of the LFS pointer for LFS files.
    let gitOid: String
    let isLFS: Bool
    /// Byte count of the LFS pointer text (0 when not LFS).
    let pointerSize: Int

    /// The ETag of this file's body, quoted: SHA-256 for LFS files, git blob id otherwise.
    var etag: String { "\"\(isLFS ? sha256 : gitOid)\"" }
}

/// A directory of a repo (only directories that hold files exist, as in git).
struct ServedDirectory: Sendable {
    let path: String
    /// A stable 40-hex id derived from the directory's children.
    let oid: String
}

/// One entry of a tree listing.
enum TreeNode: Sendable {
    case file(ServedFile)
    case directory(ServedDirectory)

    var path: String {
        switch self {
        case .file(let f): return f.path
        case .directory(let d): return d.path
        }
    }
}

struct ServedTree: Sendable {
    /// "org/name".
    let repo: String
    /// 40 hex characters, derived from every path, size and SHA-256.
    let commit: String
    let lastModified: Date
    /// Every file and directory, depth first, each directory before what it holds.
    let nodes: [TreeNode]
    /// Keyed by the path's bytes: `é` in NFC and in NFD are two files, as on the Hub.
    private let fileIndex: [[UInt8]: Int]

    init(repo: String, nodes: [TreeNode], lastModified: Date) {
        self.repo = repo
        self.nodes = nodes
        self.lastModified = lastModified
        var index: [[UInt8]: Int] = [:]
        for (i, node) in nodes.enumerated() { index[Array(node.path.utf8)] = i }
        fileIndex = index
        var commitHash = SHA1()
        commitHash.update(text: "testhub commit of \(repo)\n")
        for case .file(let f) in nodes {
            commitHash.update(text: "\(f.path)\u{0}\(f.size)\u{0}\(f.sha256)\n")
        }
        commit = commitHash.finalizeHex()
    }

    var files: [ServedFile] {
        nodes.compactMap { if case .file(let f) = $0 { return f }; return nil }
    }

    func file(at path: String) -> ServedFile? {
        guard let i = fileIndex[Array(path.utf8)], case .file(let f) = nodes[i] else { return nil }
        return f
    }

    /// Whether `revision` names this snapshot: the branch `main` (also as a ref) or the commit id.
    func matches(revision: String) -> Bool {
        revision == "main" || revision == "refs/heads/main" || revision.lowercased() == commit
    }

    /// The entries under `directory` ("" for the root): its direct children, or everything
    /// below it when `recursive`. Nil when no such directory exists.
    func listing(under directory: String, recursive: Bool) -> [TreeNode]? {
        let trimmed = directory.split(separator: "/").joined(separator: "/")
        if !trimmed.isEmpty {
            guard let i = fileIndex[Array(trimmed.utf8)], case .directory = nodes[i] else { return nil }
        }
        let prefix = trimmed.isEmpty ? "" : trimmed + "/"
        return nodes.filter { node in
            guard node.path.hasPrefix(prefix) else { return false }
            return recursive || !node.path.dropFirst(prefix.count).contains("/")
        }
    }
}

extension SHA1 {
    mutating func update(text: String) { update(Data(text.utf8)) }
}
