// FuzzShardIndex - `*.safetensors.index.json`: which shards a selection pulls in.
import FuzzSupport
import Foundation
import ModelCache

let indexPath = "text/model.safetensors.index.json"

fuzzMain { data in
    guard let index = try? ShardIndex(path: indexPath, data: data) else { return }
    for shard in index.shards {
        // Shards stay inside the index's folder: no absolute path, no '..' or '.' step, judged
        // on the bytes the filesystem sees (a combining mark after a slash hides the slash from
        // Swift's character-level hasPrefix and split).
        let bytes = Array(shard.utf8)
        expect(bytes.starts(with: Array("text/".utf8)), "shard '\(shard)' outside the index's folder")
        let parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        expect(!parts.contains { $0.elementsEqual("..".utf8) || $0.elementsEqual(".".utf8) }, "shard '\(shard)' leaves the folder")
    }
}
