// Inputs the fuzz targets (Fuzzing/, scripts/fuzz) found breaking a parser's invariant, each
// kept as a plain test of the parser's answer.
import CacheAdmin
import Foundation
import HubClient
import HubTypes
import ModelCache
import Spool
import Transfer
import XCTest

final class FuzzFindingsTests: XCTestCase {
    /// Content-Range is only taken when it names a real range of the file: start <= end < total,
    /// plain digits. Found: `bytes 131072-197607/196708` (end past the total) was accepted.
    func testContentRangeOutsideTheFileIsRefused() {
        for header in ["bytes 131072-197607/196708", "bytes 5-3/10", "bytes 0-10/10", "bytes +0-9/10",
                       "bytes 0-+9/10", "bytes 0-9/abc", "bytes 0-9/", "bytes  0-9/10", "bytes 0--9/10"] {
            XCTAssertNil(RangeResponse.parseContentRange(header), header)
        }
        XCTAssertEqual(RangeResponse.parseContentRange("bytes 131072-196707/196708").map { [$0.start, $0.end, $0.total] },
                       [131072, 196707, 196708])
        XCTAssertEqual(RangeResponse.parseContentRange("Bytes 0-0/*").map { [$0.start, $0.end] }, [0, 0])
        XCTAssertNil(RangeResponse.parseContentRange("bytes 0-0/*")?.total)
    }

    /// A job name parses only when it is the name `jobName` writes for its index. Found:
    /// `<key>.0000017` parsed as range 17, whose part the splicer looks for as `<key>.000017.part`.
    func testJobNameWithExtraLeadingZeroIsRefused() {
        let key = "3f2a9c0b1d4e5f60718293a4"
        XCTAssertNil(PlannedFile.parseJob("\(key).0000017"))
        XCTAssertNil(PlannedFile.parseJob("\(key).000000000"))
        XCTAssertEqual(PlannedFile.parseJob("\(key).000017")?.index, 17)
        XCTAssertEqual(PlannedFile.parseJob("\(key).1000000")?.index, 1_000_000)
    }

    /// A shard name leaves the index's folder by its bytes, not by Swift's characters: a
    /// combining mark after a slash makes `/\u{301}` one character, which hid the slash from a
    /// character-level check while the kernel still walks it. Found: the weight_map value
    /// `"\u{59A}x/"` failed the fuzz target's own folder check (as `text/\u{59A}x/`); crafted from
    /// it, `../\u{301}x` and `/\u{301}etc` passed ShardIndex's.
    func testShardNamesAreJudgedByTheirBytes() throws {
        func index(_ name: String) throws -> ShardIndex {
            try ShardIndex(path: "text/model.safetensors.index.json",
                           data: JSONSerialization.data(withJSONObject: ["weight_map": ["w": name]]))
        }
        for name in ["../\u{301}x.safetensors", "/\u{301}etc/x.safetensors", "a/./\u{301}b", "..", "/abs.safetensors"] {
            XCTAssertThrowsError(try index(name), "'\(name)' was taken for a shard in the folder") { error in
                XCTAssertTrue("\(error)".contains("leaves the repo"), "\(error)")
            }
        }
        // A mark on a name is fine where no step leaves the folder.
        XCTAssertEqual(try index("\u{59A}x/").shards, ["text/\u{59A}x/"])
        XCTAssertTrue(try index("\u{59A}x/").shards.allSatisfy { $0.utf8.starts(with: "text/".utf8) })
        XCTAssertEqual(try index("..\u{301}.safetensors").shards, ["text/..\u{301}.safetensors"])
    }

    /// A tree entry with a negative size is a bad answer, not a file. Found: `"size": -204800`
    /// was listed as a file of -204800 bytes (a plan of it would have a negative range count).
    func testTreeEntryWithNegativeSizeIsRefused() throws {
        let repo = try RepoID("org/name")
        let oid = String(repeating: "8b", count: 20)
        let page = Data(#"[{"type":"file","oid":"\#(oid)","size":-204800,"path":"text/model.safetensors"}]"#.utf8)
        XCTAssertThrowsError(try HubClient.treeFiles(page, of: repo, url: "http://hub/tree")) { error in
            XCTAssertTrue(error is HubError, "\(error)")
        }
        let empty = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  // the only blob id of an empty file
        let good = Data(#"[{"type":"file","oid":"\#(empty)","size":0,"path":"empty.txt"}]"#.utf8)
        XCTAssertEqual(try HubClient.treeFiles(good, of: repo, url: "http://hub/tree").map(\.size), [0])
    }

    /// A plan is only used when its key has the form job names are parsed by. Found: a plan with
    /// the key `8ab1e91a741b1d` passed the check, and its jobs could never be claimed.
    func testPlanWithForeignKeyIsNotConsistent() throws {
        let file = RepoFile(path: "m.bin", size: 100, blobID: "b", sha256: nil)
        let plan = PlannedFile(repo: "org/name", modelDir: "/m", commit: "c", file: file, rangeSize: 64, node: "n")
        XCTAssertTrue(plan.isConsistent)
        var json = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(plan)) as? [String: Any])
        json["key"] = "8ab1e91a741b1d"
        let foreign = try JSONDecoder().decode(PlannedFile.self, from: JSONSerialization.data(withJSONObject: json))
        XCTAssertFalse(foreign.isConsistent)
    }

    /// Every entry of `.incomplete/` groups under the staged file it belongs to, and no staging
    /// name is another file's lock. Found: the staging file of `uv.lock` was named `uv.lock`,
    /// which is the lock of `uv`, and `speech cache clean` took it for that lock.
    func testStagingNamesDoNotCollideWithLocksOrSidecars() {
        let paths = ["uv", "uv.lock", "yarn.lock", "a/b.lock", "x.sidecar.json", "y.import.7", "z.lock.broken.n.1.2",
                     "100%/a.bin", "model.safetensors", ".hidden.lock"]
        var owners: [String: String] = [:]
        for path in paths {
            let name = ModelLayout.stagingName(path)
            XCTAssertEqual(ModelLayout.repoPath(stagingName: name), path)
            let entries = [name, name + ".sidecar.json", name + ".lock", name + ".lock.broken.n.1.2",
                           name + ".import.42", ".\(name).sidecar.json.tmp.42.7"]
            for entry in entries {
                XCTAssertEqual(ModelLayout.owner(ofEntry: entry), name, "\(entry) of \(path)")
                XCTAssertNil(owners[entry], "\(entry) belongs to both \(owners[entry] ?? "") and \(path)")
                owners[entry] = path
            }
        }
        XCTAssertEqual(ModelLayout.stagingName("uv.lock"), "uv%2Elock")
        XCTAssertEqual(ModelLayout.stagingName("model.safetensors"), "model.safetensors")
    }

    /// Repo paths are judged on their bytes. Found: `../\u{301}x` (a combining mark after the
    /// slash) split into one character-level component, so the `..` the kernel walks was let
    /// through and the file would have been written beside the model directory.
    func testCombiningMarkDoesNotHideAParentComponent() throws {
        let repo = try RepoID("org/name")
        for path in ["../\u{301}x", "a/../\u{301}b", "a/\u{301}/../../x", ".incomplete/\u{301}x", "a//\u{301}b",
                     "./\u{301}a"] {
            XCTAssertThrowsError(try RepoPath.validate(path, in: repo), path.debugDescription)
        }
        XCTAssertNoThrow(try RepoPath.validate("caf\u{301}/\u{301}x.bin", in: repo))
        let page = Data(#"[{"type":"file","oid":"8b","size":1,"path":"../\u0301x"}]"#.utf8)
        XCTAssertThrowsError(try HubClient.treeFiles(page, of: repo, url: "http://hub/tree"))
    }

    /// Staging names are made and read on bytes too: a slash before a combining mark is escaped,
    /// and a name starting with a combining mark keeps its sidecar temp in its group.
    func testStagingNamesOfCombiningMarks() {
        for path in ["a/\u{301}b", "\u{74A}x", "\u{301}.lock", "x.lock\u{301}", "y.import.\u{301}z"] {
            let name = ModelLayout.stagingName(path)
            XCTAssertFalse(name.utf8.contains(UInt8(ascii: "/")), name)
            XCTAssertEqual(ModelLayout.repoPath(stagingName: name), path)
            for entry in [name, name + ".lock", name + ".sidecar.json", ".\(name).sidecar.json.tmp.1.2", name + ".import.3"] {
                XCTAssertEqual(ModelLayout.owner(ofEntry: entry), name, entry.debugDescription)
            }
        }
    }

    /// The huggingface_hub layout counts folders and refuses `..` in a revision on bytes too
    /// (the finding above, in ModelDirectory's hub layout and HubCache).
    func testHubLayoutJudgesPathsOnBytes() throws {
        let file = RepoFile(path: "a/\u{301}b.bin", size: 1, blobID: "b1", sha256: nil)
        XCTAssertEqual(ModelDirectory.pointerTarget(file), "../../../blobs/b1")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-findings-\(getpid())")
        defer { try? FileManager.default.removeItem(at: root) }
        let repoFolder = root.appendingPathComponent("models--org--name")
        try FileManager.default.createDirectory(at: repoFolder.appendingPathComponent("refs"), withIntermediateDirectories: true)
        let outside = String(repeating: "ab", count: 20)
        try Data(outside.utf8).write(to: repoFolder.appendingPathComponent("\u{301}x"))
        XCTAssertNil(HubCache.commit(forRevision: "../\u{301}x", repoFolder: repoFolder))
    }
}
