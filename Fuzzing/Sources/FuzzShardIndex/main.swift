// FuzzShardIndex - `*.safetensors.index.json`: which shards a selection pulls in.
import FuzzSupport
import Foundation
import ModelCache

let indexPath = "text/model.safetensors.index.json"

fuzzMain { data in
    guard let index = try? ShardIndex(path: indexPath, data: data) else { return }
    for shard in index.shards {
        // Shards stay inside the index's folder: no absolute path, no '..' or '.' step.
        expect(shard.hasPrefix("text/"), "shard '\(shard)' outside the index's folder")
        let parts = shard.split(separator: "/", omittingEmptySubsequences: false)
        expect(!parts.contains("..") && !parts.contains("."), "shard '\(shard)' leaves the folder")
    }
}
