// Files git stores itself (configs, tokenizers: not LFS) are verified against the blob id the
// tree lists, embedded and daemon-hosted alike, and `speech cache verify` re-checks them:
// a corrupt file is never cached, whatever kind of file it is.
import Digest
import CacheAdmin
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class GitBlobVerificationTests: DaemonTestCase {
    let repo = "org/GitFiles"
    /// Not LFS on the test Hub: a `.json` under 1 MiB is served from the resolve endpoint with its blob id.
    let path = "tokenizer.json"
    let size = 300_000
    var file: String { "\(repo)/\(path)" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
    }

    var finalFile: URL { modelDir(repo).appendingPathComponent(path) }

    func stagingNames() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: modelDir(repo).appendingPathComponent(".incomplete").path)) ?? []
    }

    func testFlippedByteInAGitStoredFileFailsTheEmbeddedDownloadAndIsNeverCached() throws {
        hub.setFault(.flipByte(offset: 1000), for: file)
        XCTAssertThrowsError(try download(repo)) { error in
            guard case CacheError.blobMismatch(let p, let expected, let actual) = error else {
                return XCTFail("expected a git blob id mismatch, got \(error)")
            }
            XCTAssertEqual(p, path)
            XCTAssertNotEqual(expected, actual)
            XCTAssertTrue("\(error)".contains("git blob id \(expected)"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: finalFile.path), "a corrupt git file is never cached")
        XCTAssertEqual(stagingNames(), [], "the corrupt staging file, its sidecar and its lock are gone")

        hub.clearFaults()
        try download(repo)
        try assertSameBytes(repo, path)
    }

    func testFlippedByteInAGitStoredFileFailsTheDaemonHostedRequest() throws {
        hub.setFault(.flipByte(offset: 1000), for: file)
        let daemon = try startDaemon(workers: 1, slots: 2)
        XCTAssertThrowsError(try download(repo)) { error in
            XCTAssertTrue("\(error)".contains("git blob id"), "the request fails naming the check: \(error)")
            XCTAssertTrue("\(error)".contains(path), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: finalFile.path),
                       "the splicer never renames a corrupt git file into place; log:\n\(contents(daemon.log))")
        waitUntil(timeout: 5) { self.stagingNames().isEmpty }
        XCTAssertEqual(stagingNames(), [], "no staging, sidecar or lock is left after the failed check")

        hub.clearFaults()
        let result = try download(repo)
        XCTAssertTrue(result.handedOver)
        try assertSameBytes(repo, path)
    }

    func testCacheVerifyChecksTheBlobIDOfGitStoredFiles() throws {
        try download(repo)
        // Same size, one byte changed on disk (bit rot, a stray writer): only the blob id tells.
        let handle = try FileHandle(forUpdating: finalFile)
        try handle.seek(toOffset: 1000)
        let old = try XCTUnwrap(handle.readData(ofLength: 1).first)
        try handle.seek(toOffset: 1000)
        handle.write(Data([old ^ 0xFF]))
        try handle.close()

        let admin = CacheAdmin(cacheBase: cacheBase, environment: environment())
        let report = try admin.verify(repo: repo)
        XCTAssertEqual(report.corrupt.map(\.path), [path], "verify re-hashes git files too")
        XCTAssertTrue(report.corrupt.first?.expected.hasPrefix("git blob id ") == true, "\(report.corrupt)")

        let fixed = try admin.verify(repo: repo, fix: true)
        XCTAssertEqual(fixed.corrupt.map(\.deleted), [true])
        XCTAssertFalse(FileManager.default.fileExists(atPath: finalFile.path))
        try download(repo)
        XCTAssertTrue(try admin.verify(repo: repo).isClean)
    }
}
