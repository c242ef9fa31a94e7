// Cache directories that cannot hold a cache (empty, a file, a dangling link, a device, a path
// under a file, a read-only mount) are refused before anything is written, with an error that
// names the setting and what to do: never a write into the current directory, never
// Foundation's raw NSCocoaErrorDomain text.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class CachePathTests: DaemonTestCase {
    let repo = "org/Paths"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: ["config.json": 1000, "model.safetensors": 300_000])
    }

    /// Runs `speech <args>` in `directory`; returns exit status and stderr.
    func speechIn(_ directory: URL, _ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let p = Process()
        p.executableURL = speechBinary
        p.arguments = arguments
        p.environment = environment()
        p.currentDirectoryURL = directory
        let err = logFile("speech-err")
        p.standardOutput = FileHandle.nullDevice
        p.standardError = try FileHandle(forWritingTo: err)
        try p.run()
        p.waitUntilExit()
        return (p.terminationStatus, contents(err))
    }

    func testEmptyCacheDirAndCacheBaseAreRefusedAndNothingIsWrittenHere() throws {
        let here = temp.appendingPathComponent("cwd")
        try FileManager.default.createDirectory(at: here, withIntermediateDirectories: true)
        for option in ["--cache-dir", "--cache-base"] {
            let (status, stderr) = try speechIn(here, ["download", repo, option, ""])
            XCTAssertEqual(status, 64, stderr)
            XCTAssertTrue(stderr.contains("\(option) needs a value, not an empty string"), stderr)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: here.path), [], "nothing written in the current directory")
        }
        let (status, stderr) = try speechIn(here, ["wait", repo, "--cache-base="])
        XCTAssertEqual(status, 64, stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: here.path), [])
    }

    func testEveryUnusableDirectoryIsAClearErrorNamingTheSetting() throws {
        let scratch = temp.appendingPathComponent("scratch")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let file = scratch.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let dangling = scratch.appendingPathComponent("dangling")
        try FileManager.default.createSymbolicLink(atPath: dangling.path, withDestinationPath: scratch.appendingPathComponent("nowhere").path)

        let cases: [(String, String, String)] = [  // option, path, what the error says
            ("--cache-dir", file.path, "a regular file, not a directory"),
            ("--cache-base", file.path, "a regular file, not a directory"),
            ("--cache-dir", dangling.path, "symbolic link to \(scratch.path)/nowhere, which does not exist"),
            ("--cache-base", dangling.appendingPathComponent("sub").path, "a symbolic link to nothing"),
            ("--cache-dir", "/dev/null", "a character device, not a directory"),
            ("--cache-dir", file.appendingPathComponent("model").path, "lies under \(file.path), which is a regular file"),
            ("--cache-base", file.appendingPathComponent("a/b").path, "lies under \(file.path), which is a regular file"),
        ]
        for (option, path, says) in cases {
            let (status, stderr) = try speechIn(scratch, ["download", repo, option, path])
            XCTAssertEqual(status, 1, "\(option) \(path): \(stderr)")
            XCTAssertTrue(stderr.contains(says), "\(option) \(path) says \(says): \(stderr)")
            XCTAssertTrue(stderr.contains(option), "the error names the setting: \(stderr)")
            XCTAssertFalse(stderr.contains("NSCocoaErrorDomain"), stderr)
        }
        XCTAssertEqual(hub.requests(for: "\(repo)/config.json"), 0, "refused before any transfer")

        // The library says the same.
        XCTAssertThrowsError(try downloader().downloadBlocking(repo: repo, cacheDir: file)) { error in
            guard case CacheError.unusableDirectory(_, let role, _) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(role.contains("cacheDir"))
        }
    }

    func testAReadOnlyMountIsRefusedBeforeTheTransfer() throws {
        let mountPoint = temp.appendingPathComponent("ro")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        guard TmpfsMount.mount(mountPoint.path, options: "ro,size=1m") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(mountPoint.path) }
        for option in ["--cache-dir", "--cache-base"] {
            let (status, stderr) = try speechIn(temp, ["download", repo, option, mountPoint.appendingPathComponent("models").path])
            XCTAssertEqual(status, 1, stderr)
            XCTAssertTrue(stderr.contains("\(mountPoint.path) is on a read-only file system"), stderr)
            XCTAssertFalse(stderr.contains("NSCocoaErrorDomain"), stderr)
        }
        // Offline look-ups of a read-only cache stay allowed: reading needs no write.
        let (status, stderr) = try speechIn(temp, ["download", repo, "--cache-dir", mountPoint.path, "--offline"])
        XCTAssertEqual(status, 1)
        XCTAssertTrue(stderr.contains("offline mode"), stderr)
    }
}
