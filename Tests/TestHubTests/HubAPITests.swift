// The API endpoints: revision info, the tree listing and its pages, paths-info.
import Digest
import Foundation
import TestHub
import XCTest

final class HubAPITests: HubTestCase {
    func testRevisionInfoNamesTheCommitAndEverySibling() throws {
        let r = try client.request("GET", "/api/models/org/model/revision/main")
        XCTAssertEqual(r.status, 200)
        let info = try XCTUnwrap(r.json as? [String: Any])
        XCTAssertEqual(info["id"] as? String, "org/model")
        XCTAssertEqual(info["modelId"] as? String, "org/model")
        XCTAssertEqual(info["private"] as? Bool, false)
        XCTAssertEqual(info["gated"] as? Bool, false)
        let sha = try XCTUnwrap(info["sha"] as? String)
        XCTAssertEqual(sha.count, 40)
        XCTAssertTrue(sha.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        let siblings = try XCTUnwrap(info["siblings"] as? [[String: Any]])
        XCTAssertEqual(siblings.compactMap { $0["rfilename"] as? String },
                       ["config.json", "model.safetensors", "sub/dir/x.txt", "tokenizer/vocab.json"])
        XCTAssertNil(siblings[1]["lfs"], "the Hub gives sizes and LFS data only with blobs=true")
    }

    func testRevisionInfoWithBlobsCarriesSizesAndLFSDigests() throws {
        let r = try client.request("GET", "/api/models/org/model/revision/main?blobs=true")
        let siblings = try XCTUnwrap((r.json as? [String: Any])?["siblings"] as? [[String: Any]])
        let model = try XCTUnwrap(siblings.first { $0["rfilename"] as? String == "model.safetensors" })
        let lfs = try XCTUnwrap(model["lfs"] as? [String: Any])
        XCTAssertEqual(lfs["sha256"] as? String, SHA256.hex(of: try bytes("model.safetensors")))
        XCTAssertEqual(lfs["size"] as? Int, Self.lfsSize)
        XCTAssertEqual(model["size"] as? Int, Self.lfsSize)
        XCTAssertNotNil(lfs["pointerSize"] as? Int)
        let config = try XCTUnwrap(siblings.first { $0["rfilename"] as? String == "config.json" })
        XCTAssertEqual(config["size"] as? Int, Self.config.count)
        XCTAssertNil(config["lfs"])
    }

    func testRevisionMayBeTheCommitOrAnEncodedRef() throws {
        let sha = try commit()
        XCTAssertEqual(try client.request("GET", "/api/models/org/model/revision/\(sha)").status, 200)
        XCTAssertEqual(try client.request("GET", "/api/models/org/model/revision/refs%2Fheads%2Fmain").status, 200)
        XCTAssertEqual(try client.request("GET", "/api/models/org/model").status, 200)
    }

    func testUnknownRevisionIsRevisionNotFound() throws {
        let r = try client.request("GET", "/api/models/org/model/revision/v9")
        XCTAssertEqual(r.status, 404)
        XCTAssertEqual(r.header("X-Error-Code"), "RevisionNotFound")
        XCTAssertNotNil((r.json as? [String: Any])?["error"] as? String)
    }

    func testUnknownRepoIsRepoNotFound() throws {
        let r = try client.request("GET", "/api/models/org/nothing/revision/main")
        XCTAssertEqual(r.status, 401)
        XCTAssertEqual(r.header("X-Error-Code"), "RepoNotFound")
        XCTAssertNotNil((r.json as? [String: Any])?["error"] as? String)
    }

    func testCommitIsStableAndFollowsContent() throws {
        let first = try commit()
        XCTAssertEqual(try commit(), first)
        try TestHub.writeRepo(root: root, repo: Self.repo, files: ["config.json": Data("{}".utf8)])
        XCTAssertNotEqual(try commit(), first)
    }

    func testRepoAddedAfterStartIsServed() throws {
        try TestHub.writeRepo(root: root, repo: "late/comer", files: ["a.txt": Data("a".utf8)])
        XCTAssertEqual(try client.request("GET", "/api/models/late/comer/revision/main").status, 200)
    }

    func testTreePagesFollowLinkUntilAbsent() throws {
        hub.treePageSize = 2
        var target: String? = "/api/models/org/model/tree/main?recursive=true"
        var paths: [String] = []
        var pages = 0
        while let t = target {
            let r = try client.request("GET", t)
            XCTAssertEqual(r.status, 200)
            let page = try XCTUnwrap(r.json as? [[String: Any]])
            XCTAssertLessThanOrEqual(page.count, 2)
            paths += page.compactMap { $0["path"] as? String }
            pages += 1
            target = r.header("Link").map { link in
                XCTAssertTrue(link.hasPrefix("<\(hub.baseURL)/api/models/org/model/tree/main?"), link)
                XCTAssertTrue(link.hasSuffix(">; rel=\"next\""), link)
                let url = String(link.dropFirst().prefix { $0 != ">" })
                XCTAssertTrue(url.contains("recursive=true"))
                return self.target(of: url)
            }
            XCTAssertLessThan(pages, 10)
        }
        XCTAssertEqual(pages, 4)
        XCTAssertEqual(paths, ["config.json", "model.safetensors", "sub", "sub/dir", "sub/dir/x.txt",
                               "tokenizer", "tokenizer/vocab.json"])
    }

    func testTreeEntriesCarryTypeOidSizeAndLFS() throws {
        let r = try client.request("GET", "/api/models/org/model/tree/main?recursive=true")
        let entries = try XCTUnwrap(r.json as? [[String: Any]])
        let byPath = Dictionary(uniqueKeysWithValues: entries.map { ($0["path"] as! String, $0) })
        let model = try XCTUnwrap(byPath["model.safetensors"])
        XCTAssertEqual(model["type"] as? String, "file")
        XCTAssertEqual(model["size"] as? Int, Self.lfsSize)
        XCTAssertEqual((model["oid"] as? String)?.count, 40)
        let lfs = try XCTUnwrap(model["lfs"] as? [String: Any])
        XCTAssertEqual(lfs["oid"] as? String, SHA256.hex(of: try bytes("model.safetensors")))
        XCTAssertEqual(lfs["size"] as? Int, Self.lfsSize)
        let config = try XCTUnwrap(byPath["config.json"])
        XCTAssertEqual(config["oid"] as? String, Self.gitBlobID(Self.config))
        XCTAssertNil(config["lfs"])
        XCTAssertEqual(byPath["sub"]?["type"] as? String, "directory")
    }

    func testLFSOidPrefixIsOptional() throws {
        hub.lfsOidPrefix = true
        let r = try client.request("GET", "/api/models/org/model/tree/main")
        let model = try XCTUnwrap((r.json as? [[String: Any]])?.first { $0["path"] as? String == "model.safetensors" })
        XCTAssertEqual((model["lfs"] as? [String: Any])?["oid"] as? String, "sha256:" + SHA256.hex(of: try bytes("model.safetensors")))
    }

    func testTreeWithoutRecursionListsDirectChildrenOfASubfolder() throws {
        let root = try client.request("GET", "/api/models/org/model/tree/main?recursive=false")
        XCTAssertEqual((root.json as? [[String: Any]])?.compactMap { $0["path"] as? String },
                       ["config.json", "model.safetensors", "sub", "tokenizer"])
        let sub = try client.request("GET", "/api/models/org/model/tree/main/sub%2Fdir")
        XCTAssertEqual((sub.json as? [[String: Any]])?.compactMap { $0["path"] as? String }, ["sub/dir/x.txt"])
        let missing = try client.request("GET", "/api/models/org/model/tree/main/nope")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.header("X-Error-Code"), "EntryNotFound")
    }

    func testPathsInfoAnswersFormsAndJSON() throws {
        let form = try client.request("POST", "/api/models/org/model/paths-info/main",
                                      headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                      body: Data("paths=config.json&paths=missing&paths=sub&expand=False".utf8))
        XCTAssertEqual(form.status, 200)
        let entries = try XCTUnwrap(form.json as? [[String: Any]])
        XCTAssertEqual(entries.compactMap { $0["path"] as? String }, ["config.json", "sub"])
        XCTAssertEqual(entries.compactMap { $0["type"] as? String }, ["file", "directory"])
        let json = try client.request("POST", "/api/models/org/model/paths-info/main",
                                      headers: ["Content-Type": "application/json"],
                                      body: Data("{\"paths\": [\"model.safetensors\"], \"expand\": true}".utf8))
        let model = try XCTUnwrap((json.json as? [[String: Any]])?.first)
        XCTAssertNotNil(model["lfs"])
        XCTAssertNotNil(model["lastCommit"])
    }
}
