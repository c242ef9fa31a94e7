// A call resolved against one Hub is fetched from that Hub or in the caller's process, never from
// the daemon's own Hub instead (docs/protocol.md, "Endpoints"): two test Hubs on loopback, the
// caller's serving the repo, the daemon's serving nothing, whose counters must stay at zero.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class EndpointPolicyTests: DaemonTestCase {
    let repo = "org/Mirror"
    let path = "model.bin"
    /// The Hub the daemon was started with: it serves no repo at all.
    private var daemonHub: TestHub!

    override func setUpWithError() throws {
        try super.setUpWithError()
        daemonHub = try TestHub(root: temp.appendingPathComponent("daemon-hub"))
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 3 << 20, "config.json": 100])
    }

    override func tearDownWithError() throws {
        daemonHub?.stop()
        daemonHub = nil
        try super.tearDownWithError()
    }

    private var daemonEnvironment: [String: String] { environment(endpoint: daemonHub.baseURL) }

    private func assertDaemonHubUntouched(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(daemonHub.totalRequests, 0, "the daemon's Hub was asked nothing: \(daemonHub.requestLog())", file: file, line: line)
        XCTAssertEqual(daemonHub.bodyBytes(for: "\(repo)/\(path)"), 0, file: file, line: line)
    }

    /// The daemon serves another Hub: the caller says so in one line and fetches in its own
    /// process, from its own Hub; nothing is handed over.
    func testACallResolvedAgainstAnotherHubIsFetchedInProcessFromThatHub() throws {
        try startDaemon(workers: 1, environment: daemonEnvironment)
        let (p, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the download ends")
        let said = contents(err)
        XCTAssertEqual(p.terminationStatus, 0, said)
        XCTAssertTrue(said.contains("fetches from \(daemonHub.baseURL), not \(hub.baseURL) (HF_ENDPOINT)"), said)
        XCTAssertTrue(said.contains("this process fetches \(repo) itself"), said)
        XCTAssertEqual(said.components(separatedBy: "fetches from").count, 2, "said once: \(said)")
        XCTAssertEqual(names("requests"), [], "nothing handed over")
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), 3 << 20, "fetched from the caller's Hub")
        assertDaemonHubUntouched()
    }

    /// The same for a --cache-dir outside the base, which hands over to the default base's daemon.
    func testACacheDirCallResolvedAgainstAnotherHubIsFetchedInProcess() throws {
        try startDaemon(workers: 1, environment: daemonEnvironment)
        let own = temp.appendingPathComponent("own-models/mirror")
        let (p, _, err) = try speech(["download", repo, "--cache-dir", own.path], extra: ["QWEN3_CACHE_DIR": cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the download ends")
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        XCTAssertTrue(contents(err).contains("not \(hub.baseURL) (HF_ENDPOINT)"), contents(err))
        XCTAssertEqual(try Data(contentsOf: own.appendingPathComponent(path)), try source(repo, path))
        assertDaemonHubUntouched()
    }

    /// --detach cannot fetch in its own process: it fails saying why, and hands nothing over.
    func testADetachedCallResolvedAgainstAnotherHubFailsSayingWhy() throws {
        try startDaemon(workers: 1, environment: daemonEnvironment)
        let (p, _, err) = try speech(["download", repo, "--detach", "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30), "it ends")
        XCTAssertEqual(p.terminationStatus, 1, contents(err))
        XCTAssertTrue(contents(err).contains("cannot --detach: the speech-fetchd serving \(spool.path) fetches from \(daemonHub.baseURL), not \(hub.baseURL)"),
                      contents(err))
        XCTAssertTrue(contents(err).contains("run it without --detach to fetch it in this process"), contents(err))
        XCTAssertEqual(names("requests"), [], "nothing handed over")
        assertDaemonHubUntouched()
    }

    /// A daemon started with --allow-endpoint for the caller's Hub is handed the call and fetches
    /// it from that Hub.
    func testADaemonAllowedTheCallersHubFetchesFromIt() throws {
        try startDaemon(workers: 1, environment: daemonEnvironment, arguments: ["--allow-endpoint", hub.baseURL + "/"])
        let result = try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase)
        XCTAssertTrue(result.handedOver, "handed over: the daemon fetches from the caller's Hub")
        try assertSameBytes(repo, path)
        XCTAssertGreaterThanOrEqual(hub.bodyBytes(for: "\(repo)/\(path)"), 3 << 20, "fetched from the caller's Hub")
        assertDaemonHubUntouched()
    }

    /// A request that names a Hub the daemon does not allow (planted, or from a caller that did
    /// not look) fails with a marker saying so; nothing is fetched from either Hub.
    func testARequestNamingAHubTheDaemonDoesNotAllowFailsWithAReason() throws {
        try startDaemon(workers: 1, environment: daemonEnvironment)
        let commit = String(repeating: "a", count: 40)
        let id = "0123456789abcdef01234567"
        // Written as a caller writes it (JSON), with the field a daemon of before it ignored.
        let record: [String: Any] = [
            "version": 1, "id": id, "repo": repo, "revision": "main", "commit": commit,
            "modelDir": modelDir(repo).path, "node": "somewhere", "createdAt": Date().timeIntervalSince1970,
            "files": [["path": path, "size": 3 << 20, "blobID": String(repeating: "b", count: 40)]],
            "endpoint": hub.baseURL,
        ]
        let temp = spoolPath("tmp/planted")
        try JSONSerialization.data(withJSONObject: record).write(to: URL(fileURLWithPath: temp))
        XCTAssertEqual(rename(temp, spoolPath("requests/\(id).json")), 0)
        let marker = spoolPath("failed/\(id).json")
        XCTAssertTrue(waitUntil(timeout: 15) { FileManager.default.fileExists(atPath: marker) }, "the request fails")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: marker))) as? [String: Any]
        let reason = try XCTUnwrap(json?["reason"] as? String)
        XCTAssertTrue(reason.contains("resolved against the Hub \(hub.baseURL)"), reason)
        XCTAssertTrue(reason.contains("--allow-endpoint \(hub.baseURL)"), "says what to do: \(reason)")
        XCTAssertEqual(names("plans"), [], "never planned")
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), 0)
        assertDaemonHubUntouched()
    }
}
