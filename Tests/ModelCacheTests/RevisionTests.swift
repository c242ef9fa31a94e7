// Revision: one rule for what may name a revision, whether it is sent to the Hub, read from a
// huggingface_hub cache's refs/ or written there.
import Foundation
import HubTypes
import ModelCache
import XCTest

final class RevisionTests: XCTestCase {
    let commit = String(repeating: "a", count: 40)
    let refused = ["", ".", "..", "refs/../main", ".hidden", "refs/.x", "a//b", "/main", "main/", "two words", "tab\tbed",
                   String(repeating: "x", count: 257)]

    func testTheRuleRefusesWhatCannotNameARefAndAcceptsWhatCan() {
        for raw in refused { XCTAssertNil(Revision(raw), "'\(raw)'"); XCTAssertNotNil(Revision.problem(with: raw)) }
        for raw in ["main", "v1.0", "refs/pr/1", commit, "release-2024.01"] { XCTAssertEqual(Revision(raw)?.name, raw) }
    }

    func testAHuggingFaceCacheReadsAndWritesRefsByTheSameRule() throws {
        let hub = FileManager.default.temporaryDirectory.appendingPathComponent("revision-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: hub) }
        let folder = HubRepoFolder(hub: hub, repo: try RepoID("org/model"))
        let directory = ModelDirectory(hubRepoFolder: folder.url, commit: commit)
        try FileManager.default.createDirectory(atPath: directory.filesURL.path, withIntermediateDirectories: true)
        for raw in refused where !raw.isEmpty && raw.utf8.count < 200 && !raw.hasPrefix("/") && !raw.contains("..") {
            try directory.recordRevision(raw)
            XCTAssertNil(folder.commit(forRevision: raw), "'\(raw)'")
        }
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: folder.refsPath)) ?? [], [], "no ref was written for a refused name")
        try directory.recordRevision("refs/pr/1")
        XCTAssertEqual(folder.commit(forRevision: "refs/pr/1"), commit)
    }
}
