// `speech cache ls` leaves the cache's own names out (ModelLayout.isBookkeeping): a folder
// holding only a use record or a manifest's leftover temp is no model, never "complete 0 B".
import CacheAdmin
import Foundation
import ModelCache
@testable import TestSupport
import XCTest

extension CacheAdminTests {
    func testListNeverCallsABookkeepingOnlyFolderComplete() throws {
        let empty = modelDir("acme/Empty")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        let marked = ModelDirectory(modelDir("acme/Marked"))
        try FileManager.default.createDirectory(at: marked.url, withIntermediateDirectories: true)
        try Data().write(to: URL(fileURLWithPath: marked.useMarkerPath))
        try Data("{".utf8).write(to: marked.url.appendingPathComponent("." + ModelLayout.manifest + ".tmp.99.1"))

        let models = Dictionary(uniqueKeysWithValues: admin.list().map { ($0.repo, $0) })
        for repo in ["acme/Empty", "acme/Marked"] {
            let model = try XCTUnwrap(models[repo], repo)
            XCTAssertEqual(model.state, .incomplete, repo)
            XCTAssertEqual(model.fileCount, 0, repo)
            XCTAssertEqual(model.sizeOnDisk, 0, repo)
        }
        let (output, code) = cache("ls")
        XCTAssertEqual(code, 0, output)
        XCTAssertFalse(output.contains("complete 0 B") || output.contains("complete, 0 B"), output)
        for line in output.split(separator: "\n") where line.contains("acme/") {
            XCTAssertFalse(line.contains(" complete"), "\(line)")
        }
    }
}
