// SpoolRecords - the JSON records of the spool: requests and planned files.
import Digest
import Foundation
import HubTypes
import ModelCache

/// A spool record that names a model directory: `modelDir` at `commit`, in its `layout`.
public protocol ModelDirectoryRecord {
    /// The repo whose files go there.
    var repo: String { get }
    var modelDir: String { get }
    var commit: String { get }
    /// `"hf"` (`.huggingFace`): `modelDir` is a huggingface_hub repo folder (`models--org--name`),
    /// written in that layout (blobs, snapshots/<commit>, refs/<revision>). Absent: the native
    /// layout. A value this version does not know makes the record unreadable (set aside in
    /// corrupt/), never written in another layout.
    var layout: CacheLayout? { get }
    /// The Hub (`HF_ENDPOINT`'s URL, never a token) the commit was resolved against; absent in
    /// records written before it was recorded, meaning the daemon's own endpoint.
    var endpoint: String? { get }
}

extension ModelDirectoryRecord {
    /// The model directory the record's files go into, in its layout.
    public var directory: ModelDirectory { ModelDirectory.at(modelDir, layout: layout ?? .native, commit: commit) }
}

/// A caller's request: these files of this repo at this commit, into this model directory.
public struct SpoolRequest: Codable, Sendable, Equatable, ModelDirectoryRecord {
    public var version = 1
    /// Deterministic: the same directory, commit and files give the same id, so two callers
    /// asking for the same thing create one request.
    public let id: String
    /// The repo, the revision asked for, the commit it resolved to, and the model directory.
    public let repo, revision, commit, modelDir: String
    public let files: [RepoFile]
    /// The node that asked, and when (seconds since 1970).
    public let node: String
    public let createdAt: Double
    /// `"hf"` or absent (`ModelDirectoryRecord.layout`).
    public var layout: CacheLayout?
    /// The Hub the caller resolved the commit against (`ModelDirectoryRecord.endpoint`).
    public var endpoint: String?
    /// True when the caller set `HF_HUB_DISABLE_XET=1`: its Xet-backed files go through the Hub's
    /// plain bridge as byte ranges. Absent: natively, one Xet job per file (docs/xet.md).
    public var xetBridge: Bool?

    public init(repo: String, revision: String, commit: String, modelDir: String, files: [RepoFile], node: String,
                layout: CacheLayout = .native, endpoint: String? = nil, xetBridge: Bool = false) {
        let paths = files.map(\.path).sorted().joined(separator: "\n")
        id = String(SHA256.smallHex(of: Data("\(modelDir)\n\(commit)\n\(paths)".utf8)).prefix(24))
        self.repo = repo
        self.revision = revision
        self.commit = commit
        self.modelDir = modelDir
        self.files = files
        self.node = node
        createdAt = Date().timeIntervalSince1970
        self.layout = layout.recorded
        self.endpoint = endpoint
        self.xetBridge = xetBridge ? true : nil
    }

    /// Whether `file` is planned as one Xet job: Xet-backed (the tree's `xetHash`) and the
    /// caller did not ask for the bridge.
    public func fetchesNatively(_ file: RepoFile) -> Bool { xetBridge != true && file.xetHash != nil }
}

extension ModelDirectory {
    /// A record's model directory: in the huggingface_hub layout, that repo folder at `commit`.
    public static func at(_ modelDir: String, layout: CacheLayout, commit: String) -> ModelDirectory {
        let url = URL(fileURLWithPath: modelDir, isDirectory: true)
        switch layout {
        case .huggingFace: return ModelDirectory(hubRepoFolder: url, commit: commit)
        case .native: return ModelDirectory(url)
        }
    }
}

/// One file split into range jobs: everything a worker or splicer needs to know about it.
public struct PlannedFile: Codable, Sendable, Equatable, ModelDirectoryRecord {
    public var version = 1
    public let key: String
    /// As in the request.
    public let repo, modelDir, commit: String
    public let file: RepoFile
    /// The file in `rangeCount` ranges of `rangeSize` bytes (the last one shorter).
    public let rangeSize: Int64
    public let rangeCount: Int
    /// The node whose request caused this plan (workers limited to their own node's requests look at it).
    public let node: String
    /// As in the request: "hf" or absent.
    public var layout: CacheLayout?
    /// As in the request: the Hub its workers fetch from, or absent (the daemon's own).
    public var endpoint: String?
    /// How its jobs are fetched: absent, byte ranges of the file into parts; `xet`, one job for
    /// the whole file (`rangeSize` is its size), whose claimant fetches it natively into its
    /// staging file (docs/xet.md, "Under the daemon").
    public var kind: PlanKind?

    public init(repo: String, modelDir: String, commit: String, file: RepoFile, rangeSize: Int64, node: String,
                layout: CacheLayout? = nil, endpoint: String? = nil, kind: PlanKind? = nil) {
        key = PlannedFile.key(modelDir: modelDir, path: file.path, commit: commit)
        self.repo = repo
        self.modelDir = modelDir
        self.commit = commit
        self.file = file
        self.rangeSize = rangeSize
        rangeCount = Int((file.size + rangeSize - 1) / rangeSize)
        self.node = node
        self.layout = layout
        self.endpoint = endpoint
        self.kind = kind
    }

    /// The file's key in job and part names: a digest of directory, path and commit.
    public static func key(modelDir: String, path: String, commit: String) -> String {
        String(SHA256.smallHex(of: Data("\(modelDir)\n\(path)\n\(commit)".utf8)).prefix(24))
    }

    public func jobName(_ index: Int) -> String { PlannedFile.jobName(key: key, index: index) }

    /// `<key>.<index, 6 digits>`: the name of a range's job, claim and part.
    public static func jobName(key: String, index: Int) -> String {
        // Not String(format:): Foundation's formatter is slow on Linux, and every listing of parts
        // or jobs checks each name against this (PlannedFile.parseJob): it was 43 % of a
        // handed-over download's client CPU.
        let digits = String(index)
        return key + "." + String(repeating: "0", count: max(0, 6 - digits.utf8.count)) + digits
    }

    public func range(_ index: Int) -> (start: Int64, end: Int64) {
        let start = Int64(index) * rangeSize
        return (start, min(file.size, start + rangeSize) - 1)
    }

    /// Splits a job name (`<key: 24 hex>.<index: 6 or more digits>`) into file key and range
    /// index; nil for any other name (junk in the spool is never taken for a job), and for a
    /// name that is not the one `jobName` writes for its index (`.0000017`: its part and claim
    /// would go by another name than the splicer looks for).
    public static func parseJob(_ name: String) -> (key: String, index: Int)? {
        guard let dot = name.lastIndex(of: ".") else { return nil }
        let key = name[..<dot]
        let digits = name[name.index(after: dot)...]
        guard key.utf8.count == 24, key.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }),
              digits.utf8.count >= 6, digits.utf8.count <= 9, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              let index = Int(digits), jobName(key: String(key), index: index) == name else { return nil }
        return (String(key), index)
    }
}
