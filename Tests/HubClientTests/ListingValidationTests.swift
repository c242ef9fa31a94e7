// Revisions are checked before they are sent, and every field of the Hub's answers is checked
// at resolve time: a wrapped size, a missing size or oid, a non-hex LFS oid or commit is an
// error naming repo, path and field, never a guess that fails later (or never).
import Foundation
import HubClient
import HubTypes
import TestHub
import XCTest

final class ListingValidationTests: HubTestCase {
    private let repoName = "acme/listing"
    private var repo: RepoID!

    override func setUpWithError() throws {
        try super.setUpWithError()
        repo = try RepoID(repoName)
        try TestHub.generateRepo(root: root, repo: repoName, files: ["config.json": 300, "model.safetensors": 2 << 20])
    }

    // MARK: Revisions

    func testDotDotAndOtherNonRevisionsAreRefusedBeforeAnythingIsSent() throws {
        for bad in ["..", ".", "", "refs/../main", "a b", "main\n", "/main", "refs//x", ".hidden", "v1..2"] {
            XCTAssertThrowsError(try client().snapshot(of: repo, revision: bad), "'\(bad)'") { error in
                guard case HubError.invalidRevision(let raw, _) = error else { return XCTFail("'\(bad)': \(error)") }
                XCTAssertEqual(raw, bad)
            }
        }
        XCTAssertEqual(hub.totalRequests, 0, "nothing was sent: \(hub.requestLog())")
    }

    func testARevisionWithSlashesIsSentAsOneEncodedSegment() throws {
        XCTAssertThrowsError(try client().commit(of: repo, revision: "refs/pr/1")) { error in
            guard case HubError.revisionNotFound = error else { return XCTFail("\(error)") }
        }
        XCTAssertTrue(hub.requestLog().contains { $0.contains("/revision/refs%2Fpr%2F1") }, "\(hub.requestLog())")
        XCTAssertEqual(try client().commit(of: repo, revision: "refs/heads/main").count, 40)
    }

    func testANonHexCommitIsRefusedAtResolveTime() throws {
        hub.forgeCommit(repoName, sha: "not-a-commit-but-forty-characters-long!!")
        XCTAssertThrowsError(try client().snapshot(of: repo, revision: "main")) { error in
            guard case HubError.badTreeEntry(_, _, let field, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(field, "sha")
            XCTAssertTrue("\(error)".contains(repoName), "\(error)")
        }
        XCTAssertFalse(hub.requestLog().contains { $0.contains("/tree/") }, "no listing at a commit that is none")
    }

    // MARK: Tree entries

    private func assertRefused(_ entry: String, path: String, field: String, file: StaticString = #filePath, line: UInt = #line) throws {
        hub.forgeTreeEntry(repoName, json: entry)
        XCTAssertThrowsError(try client().snapshot(of: repo, revision: "main"), file: file, line: line) { error in
            guard case HubError.badTreeEntry(let r, let p, let f, _) = error else {
                return XCTFail("\(entry): \(error)", file: file, line: line)
            }
            XCTAssertEqual(r.description, repoName, file: file, line: line)
            XCTAssertEqual(p, path, file: file, line: line)
            XCTAssertEqual(f, field, file: file, line: line)
            let text = "\(error)"
            XCTAssertTrue(text.contains(repoName) && text.contains(path) && text.contains(field), text, file: file, line: line)
        }
    }

    private let oid = String(repeating: "ab", count: 20)
    private let sha = String(repeating: "cd", count: 32)

    func testASizePast2To64IsRefusedNotWrapped() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","size":18446744073709551621,"path":"huge.bin","lfs":{"oid":"\#(sha)","size":18446744073709551621,"pointerSize":130}}"#,
                          path: "huge.bin", field: "size")
    }

    func testANegativeSizeIsRefused() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","size":-5,"path":"neg.txt"}"#, path: "neg.txt", field: "size")
    }

    func testAFractionalSizeIsRefused() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","size":5.5,"path":"half.txt"}"#, path: "half.txt", field: "size")
    }

    func testABooleanSizeIsRefused() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","size":true,"path":"bool.txt"}"#, path: "bool.txt", field: "size")
    }

    func testAnEntryWithoutSizeIsRefusedNotAnEmptyFile() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","path":"nosize.txt"}"#, path: "nosize.txt", field: "size")
    }

    func testAnEntryWithoutOidIsRefused() throws {
        try assertRefused(#"{"type":"file","size":12,"path":"nooid.txt"}"#, path: "nooid.txt", field: "oid")
    }

    func testANonHexLFSOidIsRefusedBeforeAnyByteIsFetched() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","size":12,"path":"w.safetensors","lfs":{"oid":"sha256:xyz","size":12}}"#,
                          path: "w.safetensors", field: "lfs.oid")
    }

    func testAnLFSSizeThatDisagreesIsRefused() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","size":12,"path":"w.bin","lfs":{"oid":"\#(sha)","size":13}}"#,
                          path: "w.bin", field: "lfs.size")
    }

    func testANonHexXetHashIsRefusedBeforeAnyByteIsFetched() throws {
        try assertRefused(#"{"type":"file","oid":"\#(oid)","size":12,"path":"x.bin","lfs":{"oid":"\#(sha)","size":12},"xetHash":"not-a-xet-hash"}"#,
                          path: "x.bin", field: "xetHash")
    }

    func testAXetBackedFileCarriesItsXetHash() throws {
        hub.setXet(repoName)
        let snapshot = try client().snapshot(of: repo, revision: "main")
        let model = try XCTUnwrap(snapshot.files.first { $0.path == "model.safetensors" })
        XCTAssertEqual(model.xetHash, hub.xetHash(of: "\(repoName)/model.safetensors"))
        XCTAssertNil(snapshot.files.first { $0.path == "config.json" }?.xetHash, "a git-stored file is not Xet-backed")
    }

    func testAGoodListingStillResolves() throws {
        hub.lfsOidPrefix = true
        let snapshot = try client().snapshot(of: repo, revision: "main")
        XCTAssertEqual(snapshot.files.count, 2)
        XCTAssertTrue(snapshot.files.allSatisfy { $0.blobID.count == 40 })
        XCTAssertEqual(snapshot.files.first { $0.path == "model.safetensors" }?.sha256?.count, 64)
    }
}
