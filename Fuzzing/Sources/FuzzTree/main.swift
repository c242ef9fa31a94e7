// FuzzTree - one page of the Hub's tree listing (`GET /api/models/{repo}/tree/{rev}`).
import FuzzSupport
import Foundation
import HubClient
import HubTypes
import ModelCache

let repo = try! RepoID("org/name")
let url = "http://127.0.0.1:1/api/models/org/name/tree/main?recursive=true"

fuzzMain { data in
    guard let files = try? HubClient.treeFiles(data, of: repo, url: url) else { return }
    for file in files {
        // Sizes and depths the listing may declare, and the names the cache makes of them.
        expect(file.size <= HubClient.maxFileSize, "'\(file.path)' has the size \(file.size), past 2^53")
        expect(file.size != 0 || file.sha256 != nil || file.blobID == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
               "'\(file.path)' is empty but names the blob \(file.blobID)")
        expect(file.path.utf8.count <= RepoPath.maxLength, "'\(file.path)' is longer than \(RepoPath.maxLength) bytes")
        expect(file.path.utf8.split(separator: UInt8(ascii: "/")).count <= RepoPath.maxDepth, "'\(file.path)' is too deep")
        expect(ModelLayout.stagingName(file.path).utf8.count <= ModelLayout.maxStagingName,
               "'\(file.path)' has a staging name past \(ModelLayout.maxStagingName) bytes")
        // Every path that comes out is one the cache may create.
        expect((try? RepoPath.validate(file.path, in: repo)) != nil, "unsafe path '\(file.path)' passed")
        // ... judged again here on the bytes the kernel sees: no absolute path, no empty, '.'
        // or '..' component, nothing under the cache's bookkeeping.
        let bytes = Array(file.path.utf8)
        let components = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        expect(bytes.first != UInt8(ascii: "/") && !components.contains { $0.isEmpty || $0.elementsEqual(".".utf8) || $0.elementsEqual("..".utf8) },
               "path '\(file.path)' walks out of the model directory")
        expect(!bytes.starts(with: ".incomplete/".utf8) && !bytes.starts(with: ".speech-fetch".utf8),
               "path '\(file.path)' names the cache's bookkeeping")
        expect(file.size >= 0, "'\(file.path)' has the negative size \(file.size)")
        if let sha = file.sha256 { expect(sha == sha.lowercased(), "sha256 '\(sha)' not lower case") }
    }
}
