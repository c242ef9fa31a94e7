// Small files first: under the daemon, the small files a loader reads first (config.json, the
// tokenizer) are fetched before, or beside, a big file's ranges, never after all of them.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class SmallFilesFirstTests: DaemonTestCase {
    let repo = "org/SmallFirst"
    let big = "model.safetensors"

    func testSmallFilesAreFinalBeforeTheBigFileIsHalfDone() throws {
        // 96 ranges of 256 KiB, more than the 64 lowest jobs a worker's scan starts with, each
        // range paced to 2 MiB/s: the big file takes seconds over the 4 slots. Twenty small files
        // whose jobs sort anywhere among the big file's (their keys are digests).
        let bigSize = 24 << 20
        var files = [big: bigSize]
        let small = (0..<20).map { "config_\($0).json" }
        for name in small { files[name] = 39 }
        try TestHub.generateRepo(root: root, repo: repo, files: files)
        hub.setFault(.rateLimit(bytesPerSecond: 2 << 20), for: "\(repo)/\(big)")
        let daemon = try startDaemon(workers: 1, slots: 4)

        let client = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "download")
        let dir = modelDir(repo)
        var bigBytesWhenSmallDone: Int?
        waitUntil(timeout: 60, interval: 0.005) {
            let served = self.hub.bodyBytes(for: "\(self.repo)/\(self.big)")
            if small.allSatisfy({ FileManager.default.fileExists(atPath: dir.appendingPathComponent($0).path) }) {
                bigBytesWhenSmallDone = served
                return true
            }
            return !client.process.isRunning
        }
        XCTAssertTrue(waitForExit(client.process, timeout: 60), "the download finished")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr) + contents(daemon.log))
        XCTAssertTrue(contents(daemon.log).contains("with 1 worker × 4 ranges"), "no \"1 workers\": \(contents(daemon.log))")
        guard let served = bigBytesWhenSmallDone else { return XCTFail("the small files never became final") }
        print("small files final when \(served) of \(bigSize) bytes of the big file were served")
        XCTAssertLessThan(served, bigSize / 2,
                          "every small file is final before the big file is half done (served \(served) of \(bigSize))")
    }
}
