// FirstContactTests - the first call to the endpoint (a revision's resolution): nothing there
// at all (no DNS, a refused connection) fails at once; an answer that failed (a 503), and the
// same silence once the Hub has answered, keep the retry ladder.
import Foundation
import HubClient
import HubTypes
import Synchronization
import TestHub
import XCTest

final class FirstContactTests: HubTestCase {
    private let repoName = "acme/first-contact"
    private var repo: RepoID!
    /// The ladder a user meets: five attempts, seconds apart. Failing within 2 s shows it was skipped.
    private let ladder = RetryPolicy(attempts: 5, delays: [5])

    override func setUpWithError() throws {
        try super.setUpWithError()
        repo = try RepoID(repoName)
        try TestHub.generateRepo(root: root, repo: repoName, files: ["config.json": 300])
    }

    private func assertFailsAtOnce(_ endpoint: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let client = HubClient(endpoint: try XCTUnwrap(HubEndpoint(endpoint)), token: nil, retry: ladder)
        let started = Date()
        XCTAssertThrowsError(try client.commit(of: repo, revision: "main"), file: file, line: line) { error in
            XCTAssertTrue((error as? HubError)?.isUnreachable ?? false, "\(error)", file: file, line: line)
        }
        let took = Date().timeIntervalSince(started)
        print("\(endpoint): failed after \(String(format: "%.3f", took)) s")
        XCTAssertLessThan(took, 2, "nothing there at first contact fails without the retry ladder", file: file, line: line)
    }

    func testARefusedConnectionAtFirstContactFailsAtOnce() throws {
        try assertFailsAtOnce("http://127.0.0.1:\(try closedPort())")
    }

    func testAnUnresolvableHostAtFirstContactFailsAtOnce() throws {
        // RFC 2606: `.invalid` never resolves, and the resolver says so without the network.
        try assertFailsAtOnce("http://hub.invalid")
    }

    func testAServerErrorAtFirstContactKeepsTheLadder() throws {
        hub.setFault(.status(code: 503, times: 2, retryAfter: nil), for: "\(repoName)/@api")
        let client = HubClient(endpoint: try XCTUnwrap(HubEndpoint(hub.baseURL)), token: nil,
                               retry: RetryPolicy(attempts: 3, delays: [0.01]))
        XCTAssertEqual(try client.commit(of: repo, revision: "main").count, 40)
        XCTAssertEqual(hub.requestLog().filter { $0.contains("/revision/") }.count, 3, "two 503s, then the answer: \(hub.requestLog())")
    }

    func testNothingThereAfterTheHubAnsweredKeepsTheLadder() throws {
        let client = HubClient(endpoint: try XCTUnwrap(HubEndpoint(hub.baseURL)), token: nil,
                               retry: RetryPolicy(attempts: 3, delays: [0.01]))
        let commit = try client.commit(of: repo, revision: "main")
        hub.stop()  // the listing's call finds nothing there: a blip of a mirror that just answered
        let retries = Mutex(0)
        RetryEvents.watch { _ in retries.withLock { $0 += 1 } }
        defer { RetryEvents.watch(nil) }
        XCTAssertThrowsError(try client.files(of: repo, commit: commit)) { error in
            XCTAssertTrue((error as? HubError)?.isUnreachable ?? false, "\(error)")
        }
        XCTAssertEqual(retries.withLock { $0 }, 2, "three attempts")
    }
}
