// A download whose listing has a bad entry (a wrapped size, no size) or whose revision is `..`
// fails at resolve time: no staging, no sidecar, no 0-byte file, and `main` is never used instead.
import Foundation
import HubClient
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class BadListingTests: HubTestCase {
    let repo = "org/Listing"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: ["config.json": 100])
    }

    func testAWrappedSizeOrAMissingSizeWritesNothing() throws {
        let oid = String(repeating: "1", count: 40)
        for (path, entry) in [
            ("huge.bin", #"{"type":"file","oid":"\#(oid)","size":18446744073709551621,"path":"huge.bin","lfs":{"oid":"\#(String(repeating: "2", count: 64))","size":18446744073709551621}}"#),
            ("empty.txt", #"{"type":"file","oid":"\#(oid)","path":"empty.txt"}"#),
        ] {
            let hubForPath = try TestHub(root: root)
            defer { hubForPath.stop() }
            hubForPath.forgeTreeEntry(repo, json: entry)
            XCTAssertThrowsError(try download(repo, endpoint: hubForPath.baseURL)) { error in
                guard case HubError.badTreeEntry(_, let p, let field, _) = error else { return XCTFail("\(error)") }
                XCTAssertEqual(p, path)
                XCTAssertEqual(field, "size")
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(path).path), "no file for \(path)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(".incomplete").path),
                           "no staging, no sidecar recording a wrapped size")
        }
    }

    func testRevisionDotDotIsRefusedAndMainIsNotUsed() throws {
        XCTAssertThrowsError(try downloader().downloadBlocking(repo: repo, revision: "..", cacheBaseDir: cacheBase)) { error in
            guard case HubError.invalidRevision = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(hub.totalRequests, 0, "\(hub.requestLog())")
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("config.json").path))
    }
}
