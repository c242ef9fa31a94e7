// The public API against what it cannot trust: a model folder with a link loop, an
// operation that ignores cancellation under the stall guard, a complete read-only cache asked
// online, and a byte flipped once in a file of one range.
import Foundation
import ModelCache
import SpeechFetch
import Synchronization
import TestHub
@testable import TestSupport
import XCTest

final class TrustBoundsTests: DaemonTestCase {
    func testWeightsExistEndsOnALinkLoop() throws {
        let dir = temp.appendingPathComponent("loop-model")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data("w".utf8).write(to: dir.appendingPathComponent("model.safetensors"))
        XCTAssertEqual(symlink("..", dir.appendingPathComponent("sub/up").path), 0)
        XCTAssertEqual(symlink(".", dir.appendingPathComponent("self").path), 0)
        let started = Date()
        XCTAssertTrue(HuggingFaceDownloader.weightsExist(in: dir))
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    func testTheStallGuardDoesNotWaitForAnOperationThatIgnoresCancellation() async throws {
        let release = Mutex(false)
        let started = Date()
        do {
            try await HuggingFaceDownloader.withDownloadStallGuard(modelId: "org/wedged", stallTimeoutSeconds: 1) { _ in
                // Ignores cancellation: only the flag below ends it.
                while !release.withLock({ $0 }) { usleep(20_000) }
            }
            XCTFail("the guard returned without an error")
        } catch DownloadError.stalled(let id, let seconds) {
            XCTAssertEqual(id, "org/wedged")
            XCTAssertEqual(seconds, 1)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "the guard returned at the stall, not when the operation ended")
        release.withLock { $0 = true }
    }

    func testAOneRangeFileWithAByteFlippedOnceIsFetchedAgainAndVerifies() throws {
        let repo = "org/OneRange"
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data(String(repeating: "{\"k\": 1}\n", count: 300).utf8)])
        hub.setFault(.flipByte(offset: 100, times: 1), for: "\(repo)/config.json")
        try download(repo)
        try assertSameBytes(repo, "config.json")
        XCTAssertEqual(hub.requests(for: "\(repo)/config.json"), 2, "fetched once more after the mismatch")
    }

    func testACompleteReadOnlyCacheServesAnOnlineCall() throws {
        let repo = "org/ReadOnly"
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{}".utf8)])
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=4m") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }
        try download(repo)
        XCTAssertEqual(TmpfsMount.run("/bin/mount", ["-o", "remount,ro", cacheBase.path]), 0)
        let result = try download(repo)
        XCTAssertEqual(result.fetched, [])
        XCTAssertEqual(result.files, ["config.json"])
        try assertSameBytes(repo, "config.json")
    }
}
