// Claiming across nodes: a node holds at most its fair share of the outstanding ranges;
// and in the endgame, once nothing is ready, an idle slot of another node duplicates a range a
// node is far behind on; the first part published wins and the slower claimant gives its range up.
import Foundation
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class EndgameTests: DaemonTestCase {
    let repo = "org/Endgame"
    let path = "model.safetensors"
    var file: String { "\(repo)/\(path)" }

    /// Starts speech-fetchd as node `node` (no wait for its heartbeat beside another node's).
    private func startNode(_ node: String, workers: Int, slots: Int, extra: [String: String] = [:]) throws -> (process: Process, log: URL) {
        var env = environment(extra: extra)
        env["SPEECH_FETCH_NODE"] = node
        env["SPEECH_FETCH_LEASE_SECONDS"] = "20"
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "\(workers)", "--slots", "\(slots)"],
                                     environment: env, hint: "fetchd-\(node)")
        XCTAssertTrue(waitUntil(timeout: 15) { self.descendants(of: p.processIdentifier).count >= workers },
                      "node \(node) starts its workers: \(contents(err))")
        return (p, err)
    }

    /// A download started on node a (one worker, two slots) once both ranges' responses stop
    /// after 64 KiB for `seconds`: node a's log and the download, once node a claims both ranges.
    private func downloadOnNodeAWithBothRangesStalled(for seconds: Double) throws
        -> (a: (process: Process, log: URL), download: (process: Process, stdout: URL, stderr: URL)) {
        hub.setFault(.stall(afterBytes: 64 << 10, seconds: seconds, times: 2), for: file)
        let a = try startNode("a", workers: 1, slots: 2, extra: ["HF_DOWNLOAD_STALL_TIMEOUT": "30"])
        var clientEnv = environment()
        clientEnv["SPEECH_FETCH_NODE"] = "a"
        let download = try launch(speechBinary, ["download", repo, "--cache-base", cacheBase.path], environment: clientEnv, hint: "download")
        XCTAssertTrue(waitUntil(timeout: 15) { self.names("jobs/claimed").filter { $0.contains("@a@") }.count == 2 },
                      "node a claims both ranges: \(contents(a.log))")
        return (a, download)
    }

    func testIdleNodeDuplicatesAStalledNodesRangesAndWins() throws {
        let size = 512 << 10  // two ranges of 256 KiB
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        // Node a's two responses stop after 64 KiB for 10 s; node b's come at once. Node b races
        // them one at a time (one slot), the second once stalled for 2 s: 10 s leaves room for both.
        let (a, download) = try downloadOnNodeAWithBothRangesStalled(for: 10)
        let b = try startNode("b", workers: 1, slots: 1)
        XCTAssertTrue(waitForExit(download.process, timeout: 60), "the download finishes")
        XCTAssertEqual(download.process.terminationStatus, 0, "the download succeeds: \(contents(download.stderr))")
        try assertSameBytes(repo, path)

        let bLog = contents(b.log)
        let wins = bLog.components(separatedBy: "\n").filter { $0.contains("endgame:") && $0.contains(" won") }
        XCTAssertEqual(wins.count, 2, "node b raced both stalled ranges and published first:\n\(bLog)\nnode a:\n\(contents(a.log))")
        // Node a's bytes before its stall, and node b's duplicates, are counted: no more.
        XCTAssertLessThanOrEqual(hub.bodyBytes(for: file), size + 2 * (64 << 10) + 2 * (256 << 10),
                                 "at most the stalled prefixes are fetched twice")
        // Node a gives its ranges up once its stall ends (its claims were removed by the winner).
        XCTAssertTrue(waitUntil(timeout: 15) { self.names("jobs/claimed").isEmpty && self.names("jobs/endgame").isEmpty },
                      "no claim or endgame marker is left: \(names("jobs/claimed")) \(names("jobs/endgame"))")
        XCTAssertEqual(names("jobs/ready"), [], "no range was made ready again")
    }

    /// A connection that waits for bytes longer than the lease (a CDN pausing, a TCP flow in
    /// retransmission backoff behind a full link) is a live fetch: its worker keeps refreshing
    /// the claim, so the claim is not revoked and no byte is fetched twice (a refresh only as bytes
    /// arrive would let the lease lapse in the pause).
    func testAClaimOutlivesAPauseLongerThanTheLease() throws {
        let size = 512 << 10  // two ranges of 256 KiB
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        // One response stops after 64 KiB for 4 s: twice the lease, well within the stall timeout.
        hub.setFault(.stall(afterBytes: 64 << 10, seconds: 4, times: 1), for: file)
        var env = environment(extra: ["HF_DOWNLOAD_STALL_TIMEOUT": "30", "SPEECH_FETCH_LEASE_SECONDS": "2",
                                      "SPEECH_FETCH_ENDGAME": "0", "SPEECH_FETCH_NODE": "a"])
        let (daemon, log) = try startDaemon(workers: 2, slots: 1, environment: env)
        env.removeValue(forKey: "SPEECH_FETCH_LEASE_SECONDS")
        let download = try launch(speechBinary, ["download", repo, "--cache-base", cacheBase.path], environment: env, hint: "download")
        XCTAssertTrue(waitForExit(download.process, timeout: 60), "the download finishes")
        XCTAssertEqual(download.process.terminationStatus, 0, "the download succeeds: \(contents(download.stderr))")
        try assertSameBytes(repo, path)
        XCTAssertFalse(contents(log).contains("revoked claim"), "the paused range's claim was not revoked:\n\(contents(log))")
        XCTAssertEqual(hub.bodyBytes(for: file), size, "each byte served once")
        XCTAssertTrue(daemon.isRunning)
    }

    /// Where inotify reports no new job (another node's plan on a network filesystem; here a
    /// daemon without inotify, whose idle slots poll every 2 s), a new plan's ranges are claimed
    /// within about a quarter of the poll interval, not at the slots' next poll (cluster-test D:
    /// the other nodes joined 0.9 s after the first node's claims).
    func testIdleWorkersWithoutInotifyTakeANewPlansRangesSoon() throws {
        let repos = (0..<4).map { "org/Soon\($0)" }
        for repo in repos {
            try TestHub.generateRepo(root: root, repo: repo, files: [path: 512 << 10])
            hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: "\(repo)/\(path)")  // a range takes half a second
        }
        let env = environment(extra: ["SPEECH_FETCH_INOTIFY": "0", "SPEECH_FETCH_POLL_SECONDS": "1", "SPEECH_FETCH_NODE": "a"])
        try startDaemon(workers: 2, slots: 1, environment: env)
        var latencies: [Double] = []
        for repo in repos {
            let download = try launch(speechBinary, ["download", repo, "--cache-base", cacheBase.path],
                                      environment: environment(extra: ["SPEECH_FETCH_NODE": "a"]), hint: "download")
            var planned: Date?
            var claimed: Date?
            waitUntil(timeout: 20, interval: 0.005) {
                if planned == nil, !self.names("plans").isEmpty { planned = Date() }
                if planned != nil, !self.names("jobs/claimed").isEmpty { claimed = Date() }
                return claimed != nil
            }
            XCTAssertTrue(waitForExit(download.process, timeout: 30), "the download of \(repo) finishes")
            XCTAssertEqual(download.process.terminationStatus, 0, "\(repo): \(contents(download.stderr))")
            if let planned, let claimed { latencies.append(claimed.timeIntervalSince(planned)) }
        }
        XCTAssertEqual(latencies.count, repos.count)
        XCTAssertLessThan(latencies.max() ?? 99, 0.5, "each plan's first range claimed within 0.5 s of the plan: \(latencies)")
    }

    func testNoDuplicateWithEndgameOff() throws {
        let size = 512 << 10
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        let (_, download) = try downloadOnNodeAWithBothRangesStalled(for: 2)
        let b = try startNode("b", workers: 1, slots: 1, extra: ["SPEECH_FETCH_ENDGAME": "0"])
        XCTAssertTrue(waitForExit(download.process, timeout: 60), "the download finishes")
        XCTAssertEqual(download.process.terminationStatus, 0, "the download succeeds: \(contents(download.stderr))")
        try assertSameBytes(repo, path)
        XCTAssertFalse(contents(b.log).contains("endgame:"), "SPEECH_FETCH_ENDGAME=0: no duplicate")
        XCTAssertEqual(hub.bodyBytes(for: file), size, "each byte served once")
    }

    func testClaimsStayWithinTheNodesFairShare() throws {
        let size = 2 << 20  // eight ranges of 256 KiB
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: file)  // a range takes a second
        // A second node that is alive (its heartbeat is fresh) but takes nothing.
        try FileManager.default.createDirectory(atPath: spoolPath("supervisors"), withIntermediateDirectories: true)
        let other = spoolPath("supervisors/other")
        XCTAssertTrue(FileManager.default.createFile(atPath: other, contents: Data("1".utf8)))
        let a = try startNode("a", workers: 1, slots: 8)
        var clientEnv = environment()
        clientEnv["SPEECH_FETCH_NODE"] = "a"
        let download = try launch(speechBinary, ["download", repo, "--cache-base", cacheBase.path], environment: clientEnv, hint: "download")
        XCTAssertTrue(waitUntil(timeout: 15) { self.names("jobs/claimed").count >= 4 }, "node a claims: \(contents(a.log))")
        var most = 0
        waitUntil(timeout: 1.5) {
            _ = FileManager.default.createFile(atPath: other, contents: Data("1".utf8))  // keep it fresh
            most = max(most, self.names("jobs/claimed").count)
            return false
        }
        XCTAssertEqual(most, 4, "with two live nodes, node a holds half of the eight ranges, not all it has slots for")
        unlink(other)  // the other node goes away: node a takes the rest
        XCTAssertTrue(waitForExit(download.process, timeout: 60), "the download finishes")
        XCTAssertEqual(download.process.terminationStatus, 0, "the download succeeds: \(contents(download.stderr))")
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.bodyBytes(for: file), size, "each byte served once")
    }

    func testOneWorkerProcessOfANodeMakesTheEndgameLooks() throws {
        // Each look lists the claims and stats every claim's temp part: four processes of a node
        // making them would cost the filer four times what one does.
        let (daemon, _) = try startDaemon(workers: 4, slots: 1)
        let workers = descendants(of: daemon.processIdentifier)
        XCTAssertEqual(workers.count, 4)
        // A worker just forked may not have exec'd yet (its environment is still the supervisor's):
        // read until every worker's own environment names its role.
        var roles: [String?] = []
        waitUntil(timeout: 10) {
            roles = workers.map { pid -> String? in
                guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return nil }
                let entries = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
                return entries.first { $0.hasPrefix("SPEECH_FETCH_ENDGAME_LOOKER=") }.map { String($0.dropFirst(28)) }
            }
            return !roles.contains(nil)
        }
        XCTAssertEqual(roles.filter { $0 == "1" }.count, 1, "one looker: \(roles)")
        XCTAssertEqual(roles.filter { $0 == "0" }.count, 3, "the others told not to look: \(roles)")
    }
}
