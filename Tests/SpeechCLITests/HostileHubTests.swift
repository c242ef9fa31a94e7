// `speech download` against scripts/hostile-hub, a Hub that misbehaves on purpose:
// every case ends within its bound, with a message that names what went wrong and exit status
// 1 (or succeeds, where the misbehaviour is one a client must survive), writes nothing outside
// the cache and leaves no corrupt file where a loader would look.
import Foundation
@testable import TestSupport
import XCTest

final class HostileHubTests: DaemonTestCase {
    private var hostileURL = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/hostile-hub")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("no python3") }
        let (_, out, _) = try launch(URL(fileURLWithPath: "/usr/bin/python3"), [script.path], environment: [:], hint: "hostile-hub")
        XCTAssertTrue(waitUntil(timeout: 10) { self.contents(out).hasSuffix("\n") }, "the hostile Hub printed its URL")
        hostileURL = contents(out).split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertTrue(hostileURL.hasPrefix("http://127.0.0.1:"), hostileURL)
    }

    /// Runs `speech download hostile/<mode>` with fast settings; returns its output, status and time.
    private func download(_ mode: String, extra: [String: String] = [:], arguments: [String] = [])
        -> (err: String, status: Int32, seconds: Double) {
        var env = environment(endpoint: hostileURL, extra: ["SPEECH_FETCH_RETRY_ATTEMPTS": "3"])
        for (k, v) in extra { env[k] = v }
        let started = Date()
        guard let (p, _, err) = try? launch(speechBinary, ["download", "hostile/\(mode)", "--cache-base", cacheBase.path] + arguments,
                                            environment: env, hint: mode) else {
            XCTFail("cannot start speech")
            return ("", -1, 0)
        }
        p.waitUntilExit()
        return (contents(err), p.terminationStatus, Date().timeIntervalSince(started))
    }

    private func stats() throws -> [String: Any] {
        // Foundation on Linux reads no http URL: ask with python3, which the hostile Hub needs anyway.
        let (p, out, _) = try launch(URL(fileURLWithPath: "/usr/bin/python3"),
                                     ["-c", "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())",
                                      hostileURL + "/_stats"], environment: [:], hint: "stats")
        p.waitUntilExit()
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contents(out).utf8)) as? [String: Any])
    }

    private func requests(_ mode: String) throws -> Int {
        (try stats()["requests"] as? [String: Any])?[mode] as? Int ?? 0
    }

    /// Every path under the test's folder, except the cache base, the logs and the Hub's home:
    /// nothing may appear there.
    private func strayPaths() -> [String] {
        let keep = Set(["cache", "logs", "hub", "hf-home"])
        return ((try? FileManager.default.contentsOfDirectory(atPath: temp.path)) ?? []).filter { !keep.contains($0) }
    }

    private func assertFails(_ mode: String, within bound: Double, saying texts: [String], extra: [String: String] = [:],
                             file: StaticString = #filePath, line: UInt = #line) {
        let r = download(mode, extra: extra)
        XCTAssertEqual(r.status, 1, "\(mode): exit status; stderr: \(r.err)", file: file, line: line)
        XCTAssertLessThan(r.seconds, bound, "\(mode) ended within its bound", file: file, line: line)
        for text in texts { XCTAssertTrue(r.err.contains(text), "\(mode): '\(r.err)' says '\(text)'", file: file, line: line) }
        XCTAssertEqual(strayPaths(), [], "\(mode): nothing written outside the cache", file: file, line: line)
    }

    // MARK: Endless bodies (defect 1)

    func testAnEndlessTreeListingEndsAtItsBound() {
        assertFails("endless-tree", within: 20, saying: ["sent more than \(16 << 20) bytes", "tree"])
    }

    func testAnEndlessErrorPageEndsAtItsBound() {
        assertFails("endless-error", within: 10, saying: ["error page (HTTP 500) sent more than 65536 bytes"])
    }

    func testARedirectWithAnEndlessBodyEndsAtItsBound() {
        assertFails("endless-redirect", within: 10, saying: ["redirect sent more than 65536 bytes"])
    }

    // MARK: Redirects

    func testARedirectToAFileURLIsNotFollowed() {
        assertFails("redirect-file", within: 10, saying: ["file:///etc/passwd", "only http and https are followed"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir("hostile/redirect-file").appendingPathComponent("file.txt").path))
    }

    func testARedirectToFtpIsNotFollowed() {
        assertFails("redirect-ftp", within: 10, saying: ["ftp://", "only http and https are followed"])
    }

    func testARedirectLoopEndsAfterTenRedirects() throws {
        assertFails("redirect-loop", within: 10, saying: ["too many redirects"])
        XCTAssertLessThanOrEqual(try requests("redirect-loop"), 2 + 11 * 3, "at most 10 redirects per attempt")
    }

    func testACrossHostRedirectCarriesNoToken() throws {
        let r = download("cross-host", extra: ["HF_TOKEN": "hf_secret_token"])
        XCTAssertEqual(r.status, 0, r.err)
        let seen = try XCTUnwrap(try stats()["cdnAuthorization"] as? [Any])
        XCTAssertFalse(seen.isEmpty, "the other host was asked")
        XCTAssertTrue(seen.allSatisfy { $0 is NSNull }, "no Authorization header went to the other host: \(seen)")
    }

    // MARK: Paths (defect 2)

    func testAPathSeventyFoldersDeepIsFetchedUnderABoundedStagingName() throws {
        let r = download("deep-paths")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertLessThan(r.seconds, 20)
        let deep = (0..<70).map { String(format: "folder%02d", $0) }.joined(separator: "/") + "/deep.txt"
        let data = try Data(contentsOf: modelDir("hostile/deep-paths").appendingPathComponent(deep))
        XCTAssertEqual(String(decoding: data, as: UTF8.self), "hostile hub: the real bytes of this file\n")
    }

    func testDotDotAndAbsolutePathsAreRefusedAndNothingIsWritten() {
        assertFails("dotdot", within: 10, saying: ["'../escaped.txt'", "'..' component"])
        assertFails("absolute", within: 10, saying: ["'/tmp/hostile-absolute.txt'", "absolute"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheBase.appendingPathComponent("models/hostile/escaped.txt").path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/tmp/hostile-absolute.txt"))
    }

    // MARK: Sizes (defect 3)

    func testAFileLargerThanTheFreeDiskIsRefusedBeforeAnythingIsWritten() throws {
        assertFails("huge-size", within: 10, saying: ["huge.bin is 1.0 TiB", "are free on the disk holding", "nothing was written"])
        let staging = modelDir("hostile/huge-size").appendingPathComponent(".incomplete")
        XCTAssertFalse(FileManager.default.fileExists(atPath: staging.path), "nothing was staged")
    }

    func testAFileWhoseRangesAllFailStopsAfterOneRoundOfRetries() throws {
        // 64 ranges of 1 MiB, 4 at a time, 3 attempts each: the ranges in flight use theirs and
        // the file fails, rather than every range getting its attempts (192 requests and counting).
        assertFails("big-short", within: 20, saying: ["big.bin"], extra: [
            "HF_DOWNLOAD_RANGE_CHUNK": "\(1 << 20)", "HF_DOWNLOAD_RANGE_CONCURRENCY": "4"])
        XCTAssertLessThanOrEqual(try requests("big-short"), 3 + 4 * 3, "one round of retries of the ranges in flight")
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir("hostile/big-short").appendingPathComponent("big.bin").path))
    }

    /// Under the daemon, a file of 1,024 ranges whose every range comes back empty: its plan
    /// publishes a window of jobs (8 here), never one per range, and the download fails naming it.
    func testUnderTheDaemonAFileOfManyFailingRangesPublishesOnlyItsJobWindow() throws {
        let extra = ["HF_DOWNLOAD_RANGE_CHUNK": "\(64 << 10)", "SPEECH_FETCH_JOB_WINDOW": "8", "SPEECH_FETCH_RETRY_ATTEMPTS": "3"]
        try startDaemon(workers: 2, slots: 2, environment: environment(endpoint: hostileURL, extra: extra))
        let (p, _, err) = try launch(speechBinary, ["download", "hostile/big-short", "--cache-base", cacheBase.path],
                                     environment: environment(endpoint: hostileURL, extra: extra), hint: "big-short")
        var most = 0
        let ended = waitUntil(timeout: 30) {
            // By job name: a job claimed between the two listings is in both, and counts once.
            let claimed = self.names("jobs/claimed").map { String($0.prefix { $0 != "@" }) }
            most = max(most, Set(self.names("jobs/ready") + claimed).count)
            return !p.isRunning
        }
        XCTAssertTrue(ended, "the download ends")
        XCTAssertEqual(p.terminationStatus, 1, contents(err))
        XCTAssertTrue(contents(err).contains("big.bin"), contents(err))
        XCTAssertGreaterThan(most, 0, "jobs were seen")
        XCTAssertLessThanOrEqual(most, 8, "at most the window of jobs at once, of 1,024 ranges")
        XCTAssertLessThanOrEqual(try requests("big-short"), 3 + 8 * 3, "the window's ranges were tried, not every range")
        XCTAssertEqual(names("plans"), [], "the failed file's plan is gone")
        XCTAssertEqual(names("jobs/ready"), [], "and its jobs")
    }

    func testAContentLengthLieIsRefusedAndNoCorruptFileIsVisible() {
        assertFails("length-lie", within: 10, saying: ["Content-Length"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir("hostile/length-lie").appendingPathComponent("file.txt").path))
    }

    func testASlowLorisIsAbandonedByTheStallGuard() {
        // The stall guard (1 s here) sees no complete header line; three attempts.
        assertFails("slow-loris", within: 15, saying: ["stall timeout"])
    }

    // MARK: Listings (minor items)

    func testATreeLinkLoopIsDetected() throws {
        assertFails("link-loop", within: 10, saying: ["Link header leads back to a page already read"])
        XCTAssertLessThanOrEqual(try requests("link-loop"), 3)
    }

    func testATreeListingAPathTwiceIsRefused() {
        assertFails("duplicate", within: 10, saying: ["'twice.txt'", "names it twice"])
    }

    func testAnEmptyFileWithAForeignBlobIDIsRefused() {
        assertFails("zero-oid", within: 10, saying: ["'empty.txt'", "not the empty file's blob id"])
    }

    func testThePlainRepoOfTheHostileHubDownloads() {
        let r = download("ok")
        XCTAssertEqual(r.status, 0, r.err)
    }
}
