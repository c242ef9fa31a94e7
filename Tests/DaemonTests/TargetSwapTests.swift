// A model folder swapped for a symbolic link out of the cache after the daemon judged it
// (docs/protocol.md, "Writes follow no link"): nothing lands outside the base, whether the swap
// comes between two requests or in the middle of a transfer; the request fails saying why.
import Foundation
import HubTypes
import ModelCache
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class TargetSwapTests: DaemonTestCase {
    let repo = "q/m"
    let path = "model.bin"
    var outside: URL { temp.appendingPathComponent("outside") }
    var org: URL { cacheBase.appendingPathComponent("models/q") }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
    }

    /// `mv B/models/q B/models/q.real; ln -s OUTSIDE B/models/q`.
    private func swapOrgForALinkOut() {
        XCTAssertEqual(rename(org.path, org.path + ".real"), 0)
        XCTAssertEqual(symlink(outside.path, org.path), 0)
    }

    private func outsideContents() -> [String] {
        (try? FileManager.default.subpathsOfDirectory(atPath: outside.path)) ?? []
    }

    private func settled(_ id: String, timeout: Double = 20) -> (done: Bool, reason: String?) {
        let done = spoolPath("done/\(id)"), failed = spoolPath("failed/\(id).json")
        _ = waitUntil(timeout: timeout) { FileManager.default.fileExists(atPath: done) || FileManager.default.fileExists(atPath: failed) }
        let reason = (try? Data(contentsOf: URL(fileURLWithPath: failed)))
            .flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }?["reason"] as? String
        return (FileManager.default.fileExists(atPath: done), reason)
    }

    func testARequestAfterTheFolderWasSwappedForALinkOutWritesNothingThere() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        try startDaemon(workers: 1)
        XCTAssertTrue(try download(repo).handedOver, "the first request is the daemon's")
        let snapshot = try XCTUnwrap(ModelDirectory(modelDir(repo)).readManifest())
        swapOrgForALinkOut()
        // Asked again (as a planted record, so that only the daemon writes): the same target.
        let request = SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: modelDir(repo).path,
                                   files: snapshot.files, node: "somewhere")
        try Spool(base: cacheBase, node: "n1").submit(request)
        let outcome = settled(request.id)
        XCTAssertFalse(outcome.done, "not done through the link")
        XCTAssertTrue(outcome.reason?.contains("is now a symbolic link or a file (it was replaced after it was judged)") == true,
                      outcome.reason ?? "no reason")
        XCTAssertEqual(outsideContents(), [], "nothing written outside the base")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: org.path + ".real/m/\(path)")), try source(repo, path),
                       "the real folder keeps its file")
    }

    func testASwapInTheMiddleOfATransferWritesNothingOutside() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 4 << 20])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: "\(repo)/\(path)")
        try startDaemon(workers: 1)
        let (caller, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path])
        // The first ranges are spliced into the staging file: the transfer is under way.
        let sidecar = modelDir(repo).appendingPathComponent(".incomplete")
        XCTAssertTrue(waitUntil(timeout: 20) {
            ((try? FileManager.default.contentsOfDirectory(atPath: sidecar.path)) ?? []).contains { $0.hasSuffix(".json") }
        }, "a sidecar is written: \(contents(err))")
        swapOrgForALinkOut()
        XCTAssertTrue(waitForExit(caller, timeout: 30), "the caller ends")
        // The daemon goes on without its caller: looked at once its request is settled.
        let id = try XCTUnwrap(names("requests").first?.replacingOccurrences(of: ".json", with: ""))
        let outcome = settled(id)
        XCTAssertTrue(outcome.done || outcome.reason != nil, "the request is settled")
        XCTAssertEqual(outsideContents(), [], "nothing written outside the base: \(contents(err)) \(outcome)")
        if caller.terminationStatus == 0 {
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: org.path + ".real/m/\(path)")), try source(repo, path),
                           "finished in the real folder")
        } else {
            XCTAssertTrue(contents(err).contains("was replaced after it was judged"), contents(err))
        }
    }

    /// A repo folder planted as a link inside the model directory (`weights -> OUTSIDE`, by
    /// someone who can write it): the final rename does not follow it, and the request fails
    /// naming that folder.
    func testAFolderOfTheRepoPathPlantedAsALinkIsNotFollowedByTheFinalRename() throws {
        let nested = "weights/model.bin"
        try TestHub.generateRepo(root: root, repo: repo, files: [nested: 2 << 20])
        try FileManager.default.createDirectory(at: modelDir(repo), withIntermediateDirectories: true)
        XCTAssertEqual(symlink(outside.path, modelDir(repo).appendingPathComponent("weights").path), 0)
        try startDaemon(workers: 1)
        let (p, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the download ends")
        XCTAssertEqual(p.terminationStatus, 1, contents(err))
        XCTAssertTrue(contents(err).contains("\(modelDir(repo).path)/weights"), contents(err))
        XCTAssertTrue(contents(err).contains("a symbolic link is not followed"), contents(err))
        XCTAssertEqual(outsideContents(), [], "nothing written through the link")
    }

    /// `.incomplete` planted as a link out in a model directory under the base: the pass that
    /// would stage there fails naming it, and nothing is staged through it.
    func testAStagingFolderPlantedAsALinkIsRefused() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        try FileManager.default.createDirectory(at: modelDir(repo), withIntermediateDirectories: true)
        XCTAssertEqual(symlink(outside.path, modelDir(repo).appendingPathComponent(".incomplete").path), 0)
        try startDaemon(workers: 1)
        let node = environment()["SPEECH_FETCH_NODE"] ?? ProcessInfo.processInfo.hostName
        let snapshot = RepoSnapshot(repo: repo, revision: "main", commit: String(repeating: "c", count: 40),
                                    files: [RepoFile(path: path, size: 2 << 20, blobID: String(repeating: "b", count: 40), sha256: nil)])
        let request = SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: modelDir(repo).path,
                                   files: snapshot.files, node: node)
        try Spool(base: cacheBase, node: node).submit(request)
        let outcome = settled(request.id)
        XCTAssertFalse(outcome.done)
        XCTAssertTrue(outcome.reason?.contains("\(modelDir(repo).path)/.incomplete is now a symbolic link or a file") == true,
                      outcome.reason ?? "no reason")
        XCTAssertEqual(outsideContents(), [], "nothing staged through the link")
    }
}
