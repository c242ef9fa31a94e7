// HandedOverManifestTests - a call handed to the daemon writes the model directory's manifest only
// when it changes: every node of a job asking for one model at once wrote it before the hand-over
// and again after it (a create, a sync and a rename each at the file server, per node).
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class HandedOverManifestTests: DaemonTestCase {
    let repo = "org/Manifest"
    let path = "model.safetensors"

    func testAHandedOverCallLeavesAManifestThatSaysTheSameAlone() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 1 << 20, "config.json": 100])
        try startDaemon(workers: 1)
        XCTAssertTrue(try download(repo).handedOver)
        let manifest = modelDir(repo).appendingPathComponent(".speech-fetch.json").path
        var before = stat()
        XCTAssertEqual(lstat(manifest, &before), 0, "the first call wrote the manifest")
        // The weights go missing: the same call again fetches them, with the manifest unchanged.
        XCTAssertEqual(unlink(modelDir(repo).appendingPathComponent(path).path), 0)
        XCTAssertTrue(try download(repo).handedOver)
        try assertSameBytes(repo, path)
        var after = stat()
        XCTAssertEqual(lstat(manifest, &after), 0)
        XCTAssertEqual(after.st_ino, before.st_ino, "the manifest said the same already: not written again (a new inode each write)")
    }
}
