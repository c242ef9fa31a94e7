// RepoFile - one file of a repository at one commit, as the tree API lists it.
import Foundation

public struct RepoFile: Sendable, Hashable, Codable {
    /// Path inside the repo, validated.
    public let path: String
    public let size: Int64
    /// The git blob id (the ETag the Hub sends for small files).
    public let blobID: String
    /// SHA-256 of the content for LFS files (lowercase hex, no prefix); nil for plain git files.
    public let sha256: String?
    /// The file's Xet hash (the tree's `xetHash`, 64 hex in Xet's word order) when the Hub
    /// stores it in Xet; nil otherwise. Absent from records written before Xet.
    public let xetHash: String?

    public var isLFS: Bool { sha256 != nil }

    public init(path: String, size: Int64, blobID: String, sha256: String?, xetHash: String? = nil) {
        self.path = path
        self.size = size
        self.blobID = blobID
        self.sha256 = sha256
        self.xetHash = xetHash
    }
}

/// A repository resolved at one commit: the commit id and every file.
public struct RepoSnapshot: Sendable, Codable, Equatable {
    public let repo: String
    public let revision: String
    public let commit: String
    public let files: [RepoFile]

    public init(repo: String, revision: String, commit: String, files: [RepoFile]) {
        self.repo = repo
        self.revision = revision
        self.commit = commit
        self.files = files
    }
}
