// Which files of a listing a selection takes (`FileSelection`, `FilePlan.select`): globs cross
// slashes, excludes win, and a literal path the repo does not have is an error naming it.
import HubTypes
import ModelCache
import SharedFiles
import XCTest

final class FileSelectionTests: XCTestCase {
    private let files = ["config.json", "tokenizer/vocab.json", "model.safetensors", "README.md"].map {
        RepoFile(path: $0, size: 1, blobID: String(repeating: "0", count: 40), sha256: nil)
    }

    private func selected(_ patterns: [String], excluding: [String] = []) throws -> Set<String> {
        Set(try FilePlan.select(files, FileSelection(patterns, excluding: excluding), repo: "org/name").map(\.path))
    }

    func testGlobsCrossSlashesAndLiteralPathsMustExist() throws {
        XCTAssertEqual(try selected(["*.json"]), ["config.json", "tokenizer/vocab.json"])
        XCTAssertEqual(try selected(["tokenizer/*"]), ["tokenizer/vocab.json"])
        XCTAssertEqual(try selected([]), Set(files.map(\.path)), "no pattern: every file")
        XCTAssertThrowsError(try selected(["nope.json"])) { error in
            guard case CacheError.notInRepo(let repo, let paths) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(repo, "org/name")
            XCTAssertEqual(paths, ["nope.json"])
        }
    }

    func testAnExcludeWinsOverAnInclude() throws {
        XCTAssertEqual(try selected(["*.json"], excluding: ["tokenizer/*"]), ["config.json"])
        XCTAssertEqual(try selected([], excluding: ["*.md", "*.json"]), ["model.safetensors"])
    }

    func testAPatternThatMatchedNothingSuggestsTheNearestPathsAndExtensions() {
        XCTAssertEqual(editDistance("kitten", "sitting"), 3)
        XCTAssertEqual(editDistance("", "abc"), 3)
        XCTAssertEqual(editDistance("abc", ""), 3)
        XCTAssertEqual(editDistance("e\u{301}".unicodeScalars, "é".unicodeScalars), 2, "scalars, not characters")
        XCTAssertEqual(editDistance("e\u{301}", "é"), 0, "characters")
        let paths = ["config.json", "model.safetensors", "sub/tokenizer.json"]
        XCTAssertEqual(FileSelection.nearest(to: "*.jsn", among: paths, limit: 2), ["*.json", "config.json"])
        XCTAssertEqual(FileSelection.nearest(to: "confg.json", among: paths, limit: 1), ["config.json"])
    }
}
