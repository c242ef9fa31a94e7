// Connections and repo writing: keep-alive, Connection: close, stop, synthetic repos.
import Digest
import Foundation
import TestHub
import XCTest

final class ServingTests: HubTestCase {
    func testOneConnectionServesManyRequests() throws {
        for _ in 0 ..< 20 {
            XCTAssertEqual(try client.request("GET", "/org/model/resolve/main/config.json").body, Self.config)
            XCTAssertTrue(client.isConnected)
        }
    }

    func testConnectionCloseIsHonoured() throws {
        let r = try client.request("GET", "/api/models/org/model", headers: ["Connection": "close"])
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("Connection"), "close")
        XCTAssertFalse(client.isConnected)
    }

    func testStopClosesListenersAndOpenConnectionsAndIsIdempotent() throws {
        XCTAssertEqual(try client.request("GET", "/api/models/org/model").status, 200)
        hub.stop()
        hub.stop()
        XCTAssertThrowsError(try client.request("GET", "/api/models/org/model"))
        XCTAssertThrowsError(try RawHTTPClient(hub.baseURL).request("GET", "/api/models/org/model"))
    }

    func testUnknownRoutesAre404() throws {
        XCTAssertEqual(try client.request("GET", "/nothing/here").status, 404)
        XCTAssertEqual(try RawHTTPClient(hub.cdnURL).request("GET", "/elsewhere").status, 404)
    }

    func testGeneratedFilesAreDeterministicPerSeed() throws {
        let other = root.appendingPathComponent("elsewhere")
        try TestHub.generateRepo(root: other, repo: Self.repo, files: ["model.safetensors": Self.lfsSize])
        XCTAssertEqual(try Data(contentsOf: other.appendingPathComponent("org/model/model.safetensors")), try bytes("model.safetensors"))
        try TestHub.generateRepo(root: other, repo: Self.repo, files: ["model.safetensors": Self.lfsSize], seed: 1)
        XCTAssertNotEqual(try Data(contentsOf: other.appendingPathComponent("org/model/model.safetensors")), try bytes("model.safetensors"))
        try TestHub.generateRepo(root: other, repo: Self.repo, files: ["odd.bin": 13, "empty.bin": 0])
        XCTAssertEqual(try Data(contentsOf: other.appendingPathComponent("org/model/odd.bin")).count, 13)
        XCTAssertEqual(try Data(contentsOf: other.appendingPathComponent("org/model/empty.bin")).count, 0)
    }

    func testWritingRejectsPathsOutsideTheRepo() {
        XCTAssertThrowsError(try TestHub.writeRepo(root: root, repo: Self.repo, files: ["../escape": Data()]))
        XCTAssertThrowsError(try TestHub.writeRepo(root: root, repo: Self.repo, files: ["/abs": Data()]))
        XCTAssertThrowsError(try TestHub.writeRepo(root: root, repo: "single", files: ["a": Data()]))
    }

    func testLargeFilesAreLFSByExtensionOrSize() throws {
        try TestHub.writeRepo(root: root, repo: Self.repo, files: ["tiny.bin": Data([1, 2, 3])])
        try TestHub.generateRepo(root: root, repo: Self.repo, files: ["big.txt": 1 << 20, "almost.txt": (1 << 20) - 1])
        let tree = try client.request("GET", "/api/models/org/model/tree/main")
        let entries = try XCTUnwrap(tree.json as? [[String: Any]])
        func isLFS(_ path: String) -> Bool { entries.first { $0["path"] as? String == path }?["lfs"] != nil }
        XCTAssertTrue(isLFS("tiny.bin"))
        XCTAssertTrue(isLFS("big.txt"))
        XCTAssertFalse(isLFS("almost.txt"))
        XCTAssertFalse(isLFS("config.json"))
    }

    func testEmptyFileIsServedAndRangeOnItIsUnsatisfiable() throws {
        try TestHub.writeRepo(root: root, repo: Self.repo, files: ["empty.txt": Data()])
        let r = try client.request("GET", "/org/model/resolve/main/empty.txt")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body.count, 0)
        XCTAssertEqual(r.header("ETag"), "\"\(Self.gitBlobID(Data()))\"")
        XCTAssertEqual(try client.request("GET", "/org/model/resolve/main/empty.txt", headers: ["Range": "bytes=0-"]).status, 416)
    }
}
