// One rule for where a file's bytes come from, on both hosts: a file fetched as ranges is
// located once, and a location whose size is not the tree's is refused before any byte.
import Foundation
import HubClient
import HubTypes
import ModelCache
import TestHub
@testable import TestSupport
import Transfer
import XCTest

final class FileLocatorTests: HubTestCase {
    let repo = "org/Sized"

    func testBothHostsRefuseALocationWhoseSizeIsNotTheTrees() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 2 << 20])
        let env = environment()
        let settings = DownloadSettings.fromEnvironment(env)
        let client = HubClient.fromEnvironment(env, retry: settings.retry, stallTimeout: settings.stallTimeout)
        let id = try RepoID(repo)
        let snapshot = try client.snapshot(of: id, revision: "main")
        let listed = try XCTUnwrap(snapshot.files.first { $0.path == "model.safetensors" })
        // A tree that disagrees with the file's location (the Hub's X-Linked-Size).
        let wrong = RepoFile(path: listed.path, size: listed.size + 1, blobID: listed.blobID, sha256: listed.sha256)
        func assertRefused(_ host: String, _ body: () throws -> Void) {
            XCTAssertThrowsError(try body(), host) { error in
                XCTAssertTrue("\(error)".contains("is \(listed.size) bytes there but \(wrong.size) in the tree"), "\(host): \(error)")
            }
        }

        let directory = ModelDirectory(modelDir(repo))
        assertRefused("embedded") {
            try TransferEngine(client: client, settings: settings).fetch([wrong], repo: id, commit: snapshot.commit, into: directory)
        }
        try FileManager.default.createDirectory(at: temp, withIntermediateDirectories: true)
        let part = temp.appendingPathComponent("range.part").path
        assertRefused("worker") {
            try RangeFetch(client: client, settings: settings).fetch(wrong, repo: id, commit: snapshot.commit,
                                                                     start: 0, end: 65535, into: part)
        }
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/model.safetensors"), 0, "no byte was fetched")

        // With the tree's size the worker fetches the range, and its part is closed on return
        // (the worker publishes or deletes it next).
        let worker = try RangeFetch(client: client, settings: settings)  // kept, as a worker slot keeps its fetcher
        try worker.fetch(listed, repo: id, commit: snapshot.commit, start: 65536, end: 131071, into: part)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: part)),
                       try source(repo, "model.safetensors").subdata(in: 65536 ..< 131072))
        let open = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")
        }
        XCTAssertFalse(open.contains { $0.hasSuffix("range.part") }, "the part file is closed: \(open)")
        withExtendedLifetime(worker) {}
    }
}
