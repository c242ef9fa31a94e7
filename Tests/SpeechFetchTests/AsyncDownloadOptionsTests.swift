// The async entry points take what downloadBlocking takes: `exclude:` leaves files out and
// `forceDownload:` fetches cached files again (docs/api.md).
import Foundation
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class AsyncDownloadOptionsTests: HubTestCase {
    let repo = "org/AsyncOptions"

    func testAsyncDownloadExcludesAndForceDownloadFetchesAgain() async throws {
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{\"a\": 1}".utf8),
                                                              "README.md": Data("# readme\n".utf8)])
        let dir = try await downloader().download(repo: repo, exclude: ["*.md"], cacheBaseDir: cacheBase)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.appendingPathComponent("config.json").path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("README.md").path), "excluded")

        let cached = try await downloader().downloadWithResult(repo: repo, exclude: ["*.md"], cacheBaseDir: cacheBase)
        XCTAssertEqual(cached.fetched, [], "complete: nothing fetched")
        let forced = try await downloader().downloadWithResult(repo: repo, exclude: ["*.md"], cacheBaseDir: cacheBase,
                                                               forceDownload: true)
        XCTAssertEqual(forced.fetched, ["config.json"], "forceDownload fetches the cached file again")
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/config.json"), 2 * 8, "served twice")
    }
}
