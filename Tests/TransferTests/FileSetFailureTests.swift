// One file of a set that cannot be fetched (404, a checksum mismatch) does not abort the set:
// the other files are finalized, then the call fails naming that file, and no staging lock is
// left behind.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class FileSetFailureTests: HubTestCase {
    let repo = "org/Set"
    let files = ["config.json": 2_000, "tokenizer.json": 50_000, "model.safetensors": 2 << 20, "extra.safetensors": (1 << 20) + 17]

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: files)
    }

    func stagingEntries() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: modelDir(repo).appendingPathComponent(".incomplete").path)) ?? []
    }

    func assertOthersFinal(except failed: String, file: StaticString = #filePath, line: UInt = #line) throws {
        for path in files.keys where path != failed {
            try assertSameBytes(repo, path, file: file, line: line)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(failed).path), file: file, line: line)
        XCTAssertFalse(stagingEntries().contains { $0.hasSuffix(".lock") }, "no lock left: \(stagingEntries())", file: file, line: line)
    }

    func testA404OnASmallFileFinishesTheOthersThenFailsNamingIt() throws {
        hub.setFault(.status(code: 404, times: 1000, retryAfter: nil), for: "\(repo)/tokenizer.json")
        hub.setFault(.rateLimit(bytesPerSecond: 4 << 20), for: "\(repo)/model.safetensors")  // in flight when the 404 comes
        XCTAssertThrowsError(try download(repo, extra: ["HF_DOWNLOAD_RANGE_CONCURRENCY": "16"])) { error in
            XCTAssertTrue("\(error)".contains("tokenizer.json"), "\(error)")
        }
        try assertOthersFinal(except: "tokenizer.json")
    }

    func testA404OnALargeFileFinishesTheOthersThenFailsNamingIt() throws {
        hub.setFault(.status(code: 404, times: 1000, retryAfter: nil), for: "\(repo)/model.safetensors")
        XCTAssertThrowsError(try download(repo, extra: ["HF_DOWNLOAD_RANGE_CONCURRENCY": "16"])) { error in
            XCTAssertTrue("\(error)".contains("model.safetensors"), "\(error)")
        }
        try assertOthersFinal(except: "model.safetensors")
    }

    func testAChecksumFailureFinishesTheOthersAndLeavesNoLock() throws {
        hub.setFault(.flipByte(offset: 300_000), for: "\(repo)/model.safetensors")
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: "\(repo)/extra.safetensors")  // in flight when the check fails
        XCTAssertThrowsError(try download(repo, extra: ["HF_DOWNLOAD_RANGE_CONCURRENCY": "16"])) { error in
            guard case CacheError.checksumMismatch(let path, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, "model.safetensors")
        }
        try assertOthersFinal(except: "model.safetensors")
        XCTAssertEqual(stagingEntries(), [], "the corrupt file's staging, sidecar and lock are all gone")
        hub.clearFaults()
        try download(repo)
        try assertSameBytes(repo, "model.safetensors")
    }
}
