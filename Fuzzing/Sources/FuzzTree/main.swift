// FuzzTree - one page of the Hub's tree listing (`GET /api/models/{repo}/tree/{rev}`).
import FuzzSupport
import Foundation
import HubClient

let repo = try! RepoID("org/name")
let url = "http://127.0.0.1:1/api/models/org/name/tree/main?recursive=true"

fuzzMain { data in
    guard let files = try? HubClient.treeFiles(data, of: repo, url: url) else { return }
    for file in files {
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
