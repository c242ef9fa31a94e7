// RepoIDTests - repo ids and server-supplied paths are validated before they name anything on disk.
import HubTypes
import XCTest

final class RepoIDTests: XCTestCase {
    func testWellFormedRepoIDsAreAccepted() throws {
        for raw in ["aufklarer/Kokoro-82M-CoreML", "org/name", "a_b/c.d-e", "Org9/model.v2"] {
            let id = try RepoID(raw)
            XCTAssertEqual(id.description, raw)
        }
        let id = try RepoID("aufklarer/Kokoro-82M-CoreML")
        XCTAssertEqual(id.org, "aufklarer")
        XCTAssertEqual(id.name, "Kokoro-82M-CoreML")
    }

    func testMalformedRepoIDsAreRefusedNamingTheID() {
        for raw in ["noslash", "a/b/c", "/x", "org/..", "org/.hidden", "org/na me", "", "org/"] {
            XCTAssertThrowsError(try RepoID(raw), "'\(raw)' should be refused") { error in
                guard case RepoError.invalidRepoID(let named, _) = error else {
                    return XCTFail("expected invalidRepoID for '\(raw)', got \(error)")
                }
                XCTAssertEqual(named, raw)
                XCTAssertTrue(String(describing: error).contains("'\(raw)'"),
                              "the message should name the id: \(error)")
            }
        }
    }

    func testUnsafeServerPathsAreRefused() throws {
        let repo = try RepoID("org/name")
        let overlong = String(repeating: "ab/", count: 400) + "c"  // 1201 bytes of short components
        let unsafe = ["/etc/passwd", "..", "../x", "a/../b", "a//b", "./a", "a/./b", "a/b/", "a\u{0}b", overlong,
                      ".incomplete/x", ".incomplete", "", "a\\..\\b"]
        for path in unsafe {
            XCTAssertThrowsError(try RepoPath.validate(path, in: repo), "'\(path.prefix(40))' should be refused") { error in
                guard case RepoError.unsafePath(let named, let inRepo, _) = error else {
                    return XCTFail("expected unsafePath, got \(error)")
                }
                XCTAssertEqual(named, path)
                XCTAssertEqual(inRepo, repo)
            }
        }
    }

    func testPathOfExactlyTheMaximumLengthIsAccepted() throws {
        let repo = try RepoID("org/name")
        let path = String(repeating: "abc/", count: 255) + "abcd"  // 1024 bytes
        XCTAssertEqual(path.utf8.count, RepoPath.maxLength)
        XCTAssertEqual(try RepoPath.validate(path, in: repo), path)
    }

    func testNestedRelativePathIsAccepted() throws {
        let repo = try RepoID("org/name")
        XCTAssertEqual(try RepoPath.validate("a/b/c.json", in: repo), "a/b/c.json")
        XCTAssertEqual(try RepoPath.validate(".gitattributes", in: repo), ".gitattributes")
        XCTAssertEqual(try RepoPath.validate("weights..v2/model.bin", in: repo), "weights..v2/model.bin")
    }
}
