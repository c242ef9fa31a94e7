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

    public var isLFS: Bool { sha256 != nil }

    public init(path: String, size: Int64, blobID: String, sha256: String?) {
        self.path = path
        self.size = size
        self.blobID = blobID
        self.sha256 = sha256
    }
}

/// A repository resolved at one commit: the commit id and every file.
public struct RepoSnapshot: Sendable, Codable {
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

extension RepoSnapshot {
    /// Reads a snapshot as `JSONEncoder` wrote it (the model manifest): with the quick reader,
    /// else with `JSONDecoder` (anything the quick reader does not take). Nil when neither can.
    public static func decode(_ data: Data) -> RepoSnapshot? {
        if let value = JSONValue.parse(data), let snapshot = RepoSnapshot(json: value) { return snapshot }
        return try? JSONDecoder().decode(RepoSnapshot.self, from: data)
    }

    /// The quick reader's half of `decode`: nil when `json` is not a snapshot.
    public init?(json: JSONValue) {
        guard let repo = json["repo"]?.stringValue, let revision = json["revision"]?.stringValue,
              let commit = json["commit"]?.stringValue, let entries = json["files"]?.arrayValue else { return nil }
        var files: [RepoFile] = []
        files.reserveCapacity(entries.count)
        for entry in entries {
            guard let path = entry["path"]?.stringValue, let size = entry["size"]?.int64Value,
                  let blobID = entry["blobID"]?.stringValue else { return nil }
            let sha256: String?
            switch entry["sha256"] {
            case nil, .null?: sha256 = nil
            case .string(let hex)?: sha256 = hex
            default: return nil
            }
            files.append(RepoFile(path: path, size: size, blobID: blobID, sha256: sha256))
        }
        self.init(repo: repo, revision: revision, commit: commit, files: files)
    }
}
