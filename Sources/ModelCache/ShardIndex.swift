// ShardIndex - a `*.safetensors.index.json`: which shard files hold the weights.
import Foundation

public struct ShardIndex: Sendable, Equatable {
    /// Repo path of the index itself.
    public let path: String
    /// Repo paths of every shard its weight_map names (resolved against the index's folder).
    public let shards: Set<String>

    public static func isIndexPath(_ path: String) -> Bool { path.hasSuffix(".safetensors.index.json") }

    /// The folder of a repo path ("" at the top).
    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
    }

    public init(path: String, data: Data) throws {
        guard let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let map = json["weight_map"] as? [String: Any] else {
            throw CacheError.badShardIndex(path: path, reason: "no weight_map object")
        }
        let folder = ShardIndex.folder(of: path)
        var shards = Set<String>()
        for case let name as String in map.values {
            if ShardIndex.leavesFolder(name) {
                throw CacheError.badShardIndex(path: path, reason: "shard name '\(name)' leaves the repo")
            }
            shards.insert(folder.isEmpty ? name : "\(folder)/\(name)")
        }
        self.path = path
        self.shards = shards
    }

    /// An absolute name, or one with a `.` or `..` component. Judged on the UTF-8 bytes the
    /// filesystem sees, as `RepoPath` judges the tree's paths: a combining mark after a slash
    /// makes `/\u{301}` one Swift character, which hid the slash from a character-level check.
    static func leavesFolder(_ name: String) -> Bool {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        let bytes = Array(name.utf8)
        if bytes.first == slash { return true }
        return bytes.split(separator: slash).contains { $0.elementsEqual([dot]) || $0.elementsEqual([dot, dot]) }
    }

    public init(contentsOf file: URL, path: String) throws {
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw CacheError.badShardIndex(path: path, reason: "cannot read \(file.path)")
        }
        try self.init(path: path, data: data)
    }

    /// True when this index decides about `path`: a `.safetensors` file in the index's folder.
    public func governs(_ path: String) -> Bool {
        path.hasSuffix(".safetensors") && ShardIndex.folder(of: path) == ShardIndex.folder(of: self.path)
    }
}
