// What a hostile cache tree or a hostile listing cannot do to the cache layer:
// a deep path gets a staging name that fits a directory entry, a lock that cannot be created
// is an error (not a holder to wait for), a snapshot's link loop ends its walk, an absolute
// pointer is not a complete file, and planted folder links are refused.
import Foundation
import HubTypes
import ModelCache
import SharedFiles
@testable import TestSupport
import XCTest

final class TrustBoundsTests: ScratchDirectoryTestCase {
    private let commit = String(repeating: "ab", count: 20)

    func testStagingNamesOfDeepPathsAreBoundedDistinctAndGroupTheirEntries() {
        let deep = (0..<70).map { "folder\($0)" }.joined(separator: "/")
        let a = deep + "/a.bin", b = deep + "/b.bin"
        let nameA = ModelLayout.stagingName(a), nameB = ModelLayout.stagingName(b)
        XCTAssertLessThanOrEqual(nameA.utf8.count, ModelLayout.maxStagingName)
        XCTAssertNotEqual(nameA, nameB, "paths that share a long head get different names")
        XCTAssertEqual(nameA, ModelLayout.stagingName(a), "the same path always gives the same name")
        XCTAssertTrue(ModelLayout.isHashed(nameA))
        XCTAssertTrue(ModelLayout.repoPath(stagingName: nameA).hasPrefix("folder0/folder1/"))
        for entry in [nameA + ".lock", nameA + ".sidecar.json", "." + nameA + ".sidecar.json.tmp.4194304.4294967295",
                      nameA + ".lock.broken." + String(repeating: "n", count: 48) + ".4194304.4294967295"] {
            XCTAssertLessThanOrEqual(entry.utf8.count, 255, entry)
            XCTAssertEqual(ModelLayout.owner(ofEntry: entry), nameA, entry)
        }
        // A multi-byte character or an escape at the cut is never split.
        for filler in ["é", "%", "/", "日本"] {
            let path = String(repeating: "x\(filler)", count: 120) + "/f"
            let name = ModelLayout.stagingName(path)
            XCTAssertLessThanOrEqual(name.utf8.count, ModelLayout.maxStagingName, filler)
            XCTAssertEqual(String(decoding: Array(name.utf8), as: UTF8.self), name, "valid UTF-8: \(filler)")
        }
        XCTAssertEqual(ModelLayout.stagingName("config.json"), "config.json", "short names are unchanged")
        XCTAssertFalse(ModelLayout.isHashed("config.json"))
    }

    func testAStagingLockThatCannotBeCreatedIsAnErrorNotAHolder() throws {
        let directory = ModelDirectory(scratch.appendingPathComponent("model"))
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        // `.incomplete` is a file: creating the lock fails with ENOTDIR, not EEXIST.
        XCTAssertTrue(FileManager.default.createFile(atPath: directory.stagingDirectory.path, contents: Data()))
        XCTAssertThrowsError(try StagingLock.take("model.bin", in: directory, owner: LockOwner(node: "n"), lease: 30)) { error in
            guard case CacheError.io(let path, _, let code) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(code, ENOTDIR)
            XCTAssertTrue(path.hasSuffix("model.bin.lock"), path)
        }
    }

    /// A snapshot in huggingface_hub's layout: `snapshots/<commit>/` with one good pointer.
    private func snapshot() throws -> (ModelDirectory, RepoFile) {
        let folder = scratch.appendingPathComponent("hub/models--org--m")
        let content = Data("hello\n".utf8)
        let file = RepoFile(path: "config.json", size: Int64(content.count), blobID: "ce013625030ba8dba906f756967f9e9ca394464a", sha256: nil)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("blobs"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("snapshots/\(commit)"), withIntermediateDirectories: true)
        try content.write(to: folder.appendingPathComponent("blobs/\(file.blobID)"))
        let directory = ModelDirectory(hubRepoFolder: folder, commit: commit)
        XCTAssertEqual(symlink(ModelDirectory.pointerTarget(file), directory.finalPath(file.path)), 0)
        return (directory, file)
    }

    func testALinkLoopInASnapshotEndsTheWalk() throws {
        let (directory, file) = try snapshot()
        let snap = directory.filesURL.path
        XCTAssertEqual(mkdir(snap + "/sub", 0o755), 0)
        XCTAssertEqual(symlink("..", snap + "/sub/up"), 0)       // a loop back to the snapshot
        XCTAssertEqual(symlink(".", snap + "/self"), 0)          // a loop onto itself
        XCTAssertEqual(symlink("/", snap + "/root"), 0)          // a way out of the cache
        let started = Date()
        XCTAssertEqual(directory.listFiles(), [file.path], "links to folders are not followed")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertTrue(directory.isComplete(file))
    }

    /// A folder mounted again inside itself (a bind mount: a folder, not a link) is walked once:
    /// the one walk (`FileTree.walk`) visits each folder once by device and inode.
    func testABindMountLoopInAModelDirectoryEndsTheWalk() throws {
        let model = scratch.appendingPathComponent("models/org/looped").path
        XCTAssertEqual(mkdir(scratch.appendingPathComponent("models").path, 0o755), 0)
        XCTAssertEqual(mkdir(scratch.appendingPathComponent("models/org").path, 0o755), 0)
        XCTAssertEqual(mkdir(model, 0o755), 0)
        XCTAssertEqual(mkdir(model + "/sub", 0o755), 0)
        XCTAssertEqual(mkdir(model + "/sub/loop", 0o755), 0)
        XCTAssertTrue(FileManager.default.createFile(atPath: model + "/config.json", contents: Data("{}".utf8)))
        func run(_ tool: String, _ arguments: [String]) -> Int32 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: tool)
            p.arguments = arguments
            p.standardError = FileHandle.nullDevice
            guard (try? p.run()) != nil else { return -1 }
            p.waitUntilExit()
            return p.terminationStatus
        }
        guard run("/bin/mount", ["--bind", model, model + "/sub/loop"]) == 0 else { throw XCTSkip("cannot bind-mount here (not root?)") }
        defer { _ = run("/bin/umount", ["-l", model + "/sub/loop"]) }
        XCTAssertEqual(ModelDirectory(URL(fileURLWithPath: model)).listFiles(), ["config.json"])
        XCTAssertEqual(FileTree.walk(scratch.path).map(\.path), ["models/org/looped/config.json"])
        XCTAssertEqual(FileTree.allocatedBytes(model), FileTree.facts(model + "/config.json")?.allocated)
    }

    func testAnAbsolutePointerIsNotACompleteFile() throws {
        let (directory, file) = try snapshot()
        let planted = scratch.appendingPathComponent("elsewhere/blobs/\(file.blobID)")
        try FileManager.default.createDirectory(at: planted.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("HELLO\n".utf8).write(to: planted)  // the right size, the wrong bytes
        unlink(directory.finalPath(file.path))
        XCTAssertEqual(symlink(planted.path, directory.finalPath(file.path)), 0)
        XCTAssertFalse(directory.isComplete(file), "a pointer that is not ../../blobs/<etag> does not count")
    }

    func testPlantedFolderLinksInAHubCacheAreRefused() throws {
        let (directory, _) = try snapshot()
        let hub = scratch.appendingPathComponent("hub")
        let repo = try RepoID("org/m")
        XCTAssertNoThrow(try HubCache.checkNoPlantedLinks(hub: hub, repo: repo, commit: commit))
        let outside = scratch.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        for name in ["refs", "trees", ".incomplete"] {
            XCTAssertEqual(symlink(outside.path, directory.path + "/" + name), 0)
            XCTAssertThrowsError(try HubCache.checkNoPlantedLinks(hub: hub, repo: repo, commit: commit), name) { error in
                guard case CacheError.unsafeCacheEntry(let path, let reason) = error else { return XCTFail("\(error)") }
                XCTAssertEqual(path, directory.path + "/" + name)
                XCTAssertTrue(reason.contains("symbolic link"), reason)
            }
            unlink(directory.path + "/" + name)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "nothing was written outside")
    }
}
