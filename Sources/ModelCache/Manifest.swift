// Manifest - reading the model manifest (`.speech-fetch.json`: a RepoSnapshot as JSONEncoder
// wrote it) on every offline call, with the quick reader first.
import Foundation
import HubTypes

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
