// HubTestCase - a fresh root with one model repo and a running TestHub for each test.
import Digest
import Foundation
import TestHub
import XCTest

class HubTestCase: XCTestCase {
    static let repo = "org/model"
    static let lfsKey = "org/model/model.safetensors"
    static let lfsSize = 3 * 1024 * 1024 + 123
    static let config = Data("{\"model_type\": \"test\"}\n".utf8)

    var root: URL!
    var hub: TestHub!
    var client: RawHTTPClient!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("testhub-\(UUID().uuidString)")
        try TestHub.generateRepo(root: root, repo: Self.repo, files: ["model.safetensors": Self.lfsSize])
        try TestHub.writeRepo(root: root, repo: Self.repo, files: [
            "config.json": Self.config,
            "tokenizer/vocab.json": Data("{\"a\": 1}".utf8),
            "sub/dir/x.txt": Data("deep\n".utf8),
        ])
        hub = try TestHub(root: root)
        client = try RawHTTPClient(hub.baseURL)
    }

    override func tearDownWithError() throws {
        client?.close()
        hub?.stop()
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    /// The bytes of a repo file on disk.
    func bytes(_ path: String, repo: String = HubTestCase.repo) throws -> Data {
        try Data(contentsOf: root.appendingPathComponent(repo).appendingPathComponent(path))
    }

    /// The signed CDN URL a HEAD on resolve gives for an LFS file.
    func cdnLocation(_ path: String = "model.safetensors") throws -> String {
        let head = try client.request("HEAD", "/\(Self.repo)/resolve/main/\(path)")
        XCTAssertEqual(head.status, 302)
        return try XCTUnwrap(head.header("Location"))
    }

    /// The path and query of an absolute URL.
    func target(of url: String) -> String {
        let afterScheme = url.range(of: "://")!.upperBound
        return String(url[url[afterScheme...].firstIndex(of: "/")!...])
    }

    func commit() throws -> String {
        let info = try client.request("GET", "/api/models/\(Self.repo)/revision/main")
        return try XCTUnwrap((info.json as? [String: Any])?["sha"] as? String)
    }

    static func gitBlobID(_ data: Data) -> String {
        var h = SHA1()
        h.update(Data("blob \(data.count)\u{0}".utf8))
        h.update(data)
        return h.finalizeHex()
    }
}
