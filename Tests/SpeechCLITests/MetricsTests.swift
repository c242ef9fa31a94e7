// `speech-fetchd --metrics`: the Prometheus page of a real daemon after a real daemon-served
// download, linted by Debian's promtool and scraped by its Prometheus server; what else the endpoint answers; the addresses it refuses.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class MetricsTests: DaemonTestCase {
    let repo = "org/Metered"

    /// A port nobody listens on now (the kernel's pick for a socket that is closed again).
    func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw XCTSkip("cannot bind a loopback socket here") }
        return UInt16(bigEndian: sa.sin_port)
    }

    /// Sends `request` as it is to 127.0.0.1:`port` and returns the whole answer ("" when the
    /// connection was refused or closed without one).
    func exchange(_ request: String, port: UInt16) -> String {
        let fd = connectTo(port)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            answer += buffer[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    func body(_ answer: String) -> String {
        answer.range(of: "\r\n\r\n").map { String(answer[$0.upperBound...]) } ?? ""
    }

    /// The value of one sample line (`name{labels}`) of a page; nil when it is not there.
    func sample(_ page: String, _ series: String) -> Double? {
        page.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// Starts speech-fetchd with `--metrics 127.0.0.1:<port>` and waits until it says it serves them.
    func startMetricsDaemon(port: UInt16, workers: Int = 2) throws -> URL {
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "\(workers)", "--slots", "2",
                                                    "--metrics", "127.0.0.1:\(port)"], environment: environment(), hint: "fetchd")
        let up = waitUntil(timeout: 15) {
            self.contents(err).contains("serving metrics at http://127.0.0.1:\(port)/metrics")
                && self.descendants(of: p.processIdentifier).count >= workers
        }
        XCTAssertTrue(up, "speech-fetchd serves its metrics; log:\n\(contents(err))")
        return err
    }

    func testThePageCountsADaemonServedDownloadAndPromtoolAcceptsIt() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 3 << 20, "config.json": 1000])
        let port = try freePort()
        let log = try startMetricsDaemon(port: port)
        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "client")
        XCTAssertTrue(waitForExit(client, timeout: 60))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))
        // The supervisor settles the request on its next pass.
        var page = ""
        XCTAssertTrue(waitUntil(timeout: 15, interval: 0.1) {
            page = self.body(self.exchange("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", port: port))
            return self.sample(page, "speech_fetchd_requests_settled_total{outcome=\"done\"}") == 1
        }, "the page counts the settled request:\n\(page)\nlog:\n\(contents(log))")
        print(page)
        XCTAssertEqual(sample(page, "speech_fetchd_requests{state=\"done\"}"), 1, page)
        XCTAssertEqual(sample(page, "speech_fetchd_requests{state=\"active\"}"), 0, page)
        XCTAssertEqual(sample(page, "speech_fetchd_cache_models"), 1, page)
        XCTAssertGreaterThanOrEqual(sample(page, "speech_fetchd_cache_bytes") ?? 0, Double(3 << 20), page)
        // 3 MiB in 256 KiB ranges (environment()), and the small file as one job.
        XCTAssertEqual(sample(page, "speech_fetchd_range_jobs_planned_total"), 13, page)
        XCTAssertEqual(sample(page, "speech_fetchd_files_fetched_total"), 2, page)
        XCTAssertEqual(sample(page, "speech_fetchd_bytes_fetched_total"), Double((3 << 20) + 1000), page)
        XCTAssertEqual(sample(page, "speech_fetchd_failures_total{kind=\"other\"}"), 0, page)
        XCTAssertEqual(sample(page, "speech_fetchd_supervisors"), 1, page)
        XCTAssertTrue(page.contains("speech_fetchd_build_info{version=\""), page)
        XCTAssertFalse(page.contains(cacheBase.path), "the page names no path")

        let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let promtool else {
            throw XCTSkip("promtool is not installed (apt-get install prometheus; scripts/test installs it): the page was not linted")
        }
        let input = temp.appendingPathComponent("metrics.txt")
        try Data(page.utf8).write(to: input)
        let (lint, out, err) = try launch(URL(fileURLWithPath: promtool), ["check", "metrics"], environment: [:], hint: "promtool",
                                          standardInput: try FileHandle(forReadingFrom: input))
        XCTAssertTrue(waitForExit(lint, timeout: 30))
        XCTAssertEqual(lint.terminationStatus, 0, "promtool check metrics: \(contents(out)) \(contents(err))")
        XCTAssertEqual((contents(out) + contents(err)).trimmingCharacters(in: .whitespacesAndNewlines), "",
                       "promtool has nothing to say about the page")
    }

    /// Debian's Prometheus server scrapes the daemon every second; the values come back through
    /// its query API (`/api/v1/query`), as a dashboard or an alert would read them.
    func testAPrometheusServerScrapesTheDaemon() throws {
        let prometheus = URL(fileURLWithPath: "/usr/bin/prometheus")
        guard FileManager.default.isExecutableFile(atPath: prometheus.path) else {
            throw XCTSkip("prometheus is not installed (apt-get install prometheus; scripts/test installs it): nothing scraped the page")
        }
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 2 << 20])
        let port = try freePort()
        let log = try startMetricsDaemon(port: port, workers: 1)
        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "client")
        XCTAssertTrue(waitForExit(client, timeout: 60))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))

        // The server, its configuration and its data under the test's temp folder (removed in
        // tearDown, which also kills the server).
        let config = temp.appendingPathComponent("prometheus.yml")
        try Data("""
            global:
              scrape_interval: 1s
            scrape_configs:
              - job_name: speech-fetchd
                static_configs:
                  - targets: ['127.0.0.1:\(port)']

            """.utf8).write(to: config)
        let web = try freePort()
        let (server, _, serverErr) = try launch(prometheus, ["--config.file=\(config.path)",
                                                             "--storage.tsdb.path=\(temp.appendingPathComponent("tsdb").path)",
                                                             "--web.listen-address=127.0.0.1:\(web)"],
                                                environment: ["HOME": temp.path], hint: "prometheus")
        // One instant query; the value of its first sample ("" until the server has one).
        func query(_ expression: String) -> String {
            let answer = body(exchange("GET /api/v1/query?query=\(expression) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", port: web))
            guard let json = try? JSONSerialization.jsonObject(with: Data(answer.utf8)) as? [String: Any],
                  let data = json["data"] as? [String: Any], let result = data["result"] as? [[String: Any]],
                  let value = result.first?["value"] as? [Any], value.count == 2 else { return "" }
            return "\(value[1])"
        }
        var bytes = ""
        XCTAssertTrue(waitUntil(timeout: 20, interval: 0.25) {
            bytes = query("speech_fetchd_bytes_fetched_total")
            return bytes == "\(2 << 20)"
        }, "Prometheus scraped the bytes the daemon fetched (got '\(bytes)'); prometheus:\n\(contents(serverErr))\ndaemon:\n\(contents(log))")
        XCTAssertTrue(server.isRunning)
        XCTAssertEqual(query("up%7Bjob%3D%22speech-fetchd%22%7D"), "1", "the target is up")
        XCTAssertEqual(query("speech_fetchd_build_info"), "1", "the build info is scraped")
        XCTAssertEqual(query("speech_fetchd_requests%7Bstate%3D%22done%22%7D"), "1")
    }

    func testAClaimRevokedAfterAWorkerIsKilledIsCounted() throws {
        let file = "model.safetensors"
        try TestHub.generateRepo(root: root, repo: repo, files: [file: 2 << 20])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: "\(repo)/\(file)")  // 0.25 s per range
        let port = try freePort()
        let log = try startMetricsDaemon(port: port)
        let supervisor = try XCTUnwrap(supervisorPid())
        let workers = Set(descendants(of: supervisor))
        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "client")
        guard let (victim, _) = firstClaim(by: workers) else { return XCTFail("no worker claimed a job; log:\n\(contents(log))") }
        XCTAssertEqual(kill(victim, SIGKILL), 0)
        XCTAssertTrue(waitForExit(client, timeout: 30))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))
        var page = ""
        XCTAssertTrue(waitUntil(timeout: 15, interval: 0.1) {
            page = self.body(self.exchange("GET /metrics HTTP/1.1\r\n\r\n", port: port))
            return (self.sample(page, "speech_fetchd_claims_revoked_total") ?? 0) >= 1
        }, "the revoked claim is counted:\n\(page)\nlog:\n\(contents(log))")
        XCTAssertTrue(contents(log).contains("revoked claim"), contents(log))
    }

    /// A scrape keeps what cannot have changed (parsed requests, settled states, an idle spool's
    /// last look while its generation stands still), yet every gauge follows the spool: an idle
    /// page shows a request once it is asked, its claimed ranges while it is in flight, done once
    /// it settles, and a second request asked after that beside it.
    func testTheGaugesFollowTheSpoolFromScrapeToScrape() throws {
        let file = "model.safetensors"
        try TestHub.generateRepo(root: root, repo: repo, files: [file: 2 << 20])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: "\(repo)/\(file)")  // 0.25 s per 256 KiB range
        let port = try freePort()
        let log = try startMetricsDaemon(port: port)
        func page() -> String { body(exchange("GET /metrics HTTP/1.1\r\n\r\n", port: port)) }
        func requests(_ page: String, _ state: String) -> Double? { sample(page, "speech_fetchd_requests{state=\"\(state)\"}") }
        var seen = page()
        XCTAssertEqual(requests(seen, "active"), 0, seen)
        XCTAssertEqual(requests(seen, "done"), 0, seen)
        XCTAssertEqual(page(), seen, "an idle spool's page stays as it was")

        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path], hint: "client")
        XCTAssertTrue(waitUntil(timeout: 15, interval: 0.05) {
            seen = page()
            return requests(seen, "active") == 1 && (self.sample(seen, "speech_fetchd_range_jobs{state=\"claimed\"}") ?? 0) >= 1
        }, "the page shows the request in flight with a claimed range:\n\(seen)\nlog:\n\(contents(log))")
        XCTAssertTrue(seen.contains("speech_fetchd_active_transfers{node="), seen)
        XCTAssertTrue(waitForExit(client, timeout: 60))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))
        XCTAssertTrue(waitUntil(timeout: 15, interval: 0.1) {
            seen = page()
            return requests(seen, "done") == 1 && requests(seen, "active") == 0
        }, "the page shows the request done:\n\(seen)\nlog:\n\(contents(log))")
        for state in ["ready", "claimed", "fetched"] {
            XCTAssertEqual(sample(seen, "speech_fetchd_range_jobs{state=\"\(state)\"}"), 0, seen)
        }

        // Asked after the idle scrapes: the generation moved, so the page looks again.
        let second = "org/Second"
        try TestHub.generateRepo(root: root, repo: second, files: ["config.json": 1000])
        let (other, _, otherErr) = try speech(["download", second, "--cache-base", cacheBase.path], hint: "second")
        XCTAssertTrue(waitForExit(other, timeout: 60))
        XCTAssertEqual(other.terminationStatus, 0, contents(otherErr))
        XCTAssertTrue(waitUntil(timeout: 15, interval: 0.1) {
            seen = page()
            return requests(seen, "done") == 2
        }, "the second request is counted beside the first:\n\(seen)\nlog:\n\(contents(log))")
    }

    /// A failure's metric label and what the command line does with it follow the record's
    /// `kind`, never its reason's words: every kind, each with a reason reworded to say nothing
    /// of it (the transport failure's in the very words `speech cancel` writes), counts under
    /// its own label, and the waiters exit 1, told "cancelled" for the cancelled kind alone.
    func testMetricLabelsAndExitCodesFollowTheRecordedKindNotTheWording() throws {
        // kind (as recorded in failed/<rid>.json) and the label it counts under.
        let kinds: [(kind: String, label: String)] = [
            ("cancelled", "cancelled"), ("checksum-mismatch", "verification"), ("disk-full", "disk"),
            ("not-found", "hub"), ("gated", "hub"), ("http-error", "hub"), ("bad-answer", "hub"),
            ("transport", "network"), ("refused", "other"), ("local", "other"), ("other", "other"),
        ]
        func repo(_ n: Int) -> String { "org/Failing\(n)" }
        func reason(_ n: Int) -> String {
            kinds[n].kind == "transport" ? "cancelled by `speech cancel`" : "reworded \(n): these words name no kind of failure"
        }
        for n in kinds.indices {
            try TestHub.generateRepo(root: root, repo: repo(n), files: ["model.bin": 256 << 10])
            hub.setFault(.rateLimit(bytesPerSecond: 4 << 10), for: "\(repo(n))/model.bin")  // in flight until failed below
        }
        let port = try freePort()
        let log = try startMetricsDaemon(port: port, workers: 1)
        let downloads = try kinds.indices.map { n in
            try speech(["download", repo(n), "--cache-base", cacheBase.path], hint: "download-\(n)")
        }
        XCTAssertTrue(waitUntil(timeout: 30, interval: 0.1) {
            let text = self.contents(log)
            return kinds.indices.allSatisfy { text.contains("accepted \(repo($0)) @") }
        }, "the daemon accepts every request:\n\(contents(log))")
        // Each request fails with its kind, as a worker, the planner or `speech cancel` would record it.
        var ids: [String: String] = [:]
        for name in names("requests") {
            let record = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: spoolPath("requests/\(name)")))) as? [String: Any])
            ids[try XCTUnwrap(record["repo"] as? String)] = try XCTUnwrap(record["id"] as? String)
        }
        for n in kinds.indices {
            let id = try XCTUnwrap(ids[repo(n)], "\(ids)")
            let marker = try JSONSerialization.data(withJSONObject: ["reason": reason(n), "kind": kinds[n].kind])
            try marker.write(to: URL(fileURLWithPath: spoolPath("tmp/marker-\(n)")))
            XCTAssertEqual(link(spoolPath("tmp/marker-\(n)"), spoolPath("failed/\(id).json")), 0)
        }
        XCTAssertEqual(utime(spoolPath("generation"), nil), 0)  // as every publisher of a marker does

        for (n, download) in downloads.enumerated() {
            XCTAssertTrue(waitForExit(download.process, timeout: 30))
            XCTAssertEqual(download.process.terminationStatus, 1, "\(kinds[n].kind): \(contents(download.stderr))")
            let said = contents(download.stderr)
            XCTAssertEqual(said.contains("was cancelled (`speech cancel`)"), kinds[n].kind == "cancelled", "\(kinds[n].kind): \(said)")
            let (waiter, _, waitErr) = try speech(["wait", repo(n), "--cache-base", cacheBase.path], hint: "wait-\(n)")
            XCTAssertTrue(waitForExit(waiter, timeout: 30))
            XCTAssertEqual(waiter.terminationStatus, 1, "\(kinds[n].kind): \(contents(waitErr))")
            XCTAssertEqual(contents(waitErr).contains("was cancelled (`speech cancel`)"), kinds[n].kind == "cancelled",
                           "\(kinds[n].kind): \(contents(waitErr))")
        }
        var page = ""
        XCTAssertTrue(waitUntil(timeout: 15, interval: 0.1) {
            page = self.body(self.exchange("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", port: port))
            return self.sample(page, "speech_fetchd_requests_settled_total{outcome=\"failed\"}") == Double(kinds.count)
        }, "the page counts every failed request:\n\(page)\nlog:\n\(contents(log))")
        for label in ["cancelled", "disk", "hub", "network", "verification", "other"] {
            XCTAssertEqual(sample(page, "speech_fetchd_failures_total{kind=\"\(label)\"}"),
                           Double(kinds.filter { $0.label == label }.count), "\(label):\n\(page)")
        }
    }

    func testTheEndpointServesOnlyGetMetricsAndSurvivesASilentClient() throws {
        let port = try freePort()
        _ = try startMetricsDaemon(port: port, workers: 1)
        XCTAssertTrue(exchange("GET / HTTP/1.1\r\n\r\n", port: port).hasPrefix("HTTP/1.1 404 "))
        XCTAssertTrue(exchange("GET /metrics/../secret HTTP/1.1\r\n\r\n", port: port).hasPrefix("HTTP/1.1 404 "))
        let post = exchange("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", port: port)
        XCTAssertTrue(post.hasPrefix("HTTP/1.1 405 ") && post.contains("Allow: GET"), post)
        XCTAssertTrue(exchange("nonsense\r\n\r\n", port: port).hasPrefix("HTTP/1.1 400 "))
        XCTAssertTrue(exchange(String(repeating: "x", count: 20_000), port: port).hasPrefix("HTTP/1.1 400 "), "a head past 8 KiB is refused")
        // A client that connects and says nothing holds the endpoint at most its read timeout.
        let silent = connectTo(port)
        XCTAssertGreaterThanOrEqual(silent, 0)
        defer { close(silent) }
        let started = Date()
        let answer = exchange("GET /metrics HTTP/1.0\r\n\r\n", port: port)
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 ") && answer.contains("text/plain; version=0.0.4"), answer)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "the silent client was dropped after the 2 s read timeout")
    }

    func testACopiedDaemonsBuildInfoNamesTheCommitItWasBuiltFrom() throws {
        // Copied out of the checkout into a folder whose own `.git` names another commit: the
        // page's build_info says what `--version` says, the commit recorded at build time (a
        // look at run time found the other `.git`, or none: "unknown").
        let (version, out, _) = try launch(fetchdBinary, ["--version"], environment: environment(), hint: "version")
        XCTAssertTrue(waitForExit(version, timeout: 15))
        let commit = try XCTUnwrap(contents(out).split(separator: "\n").first { $0.hasPrefix("commit ") }.map { String($0.dropFirst(7)) },
                                   contents(out))
        XCTAssertTrue(commit.range(of: "^[0-9a-f]{40}(\\+dirty)?$", options: .regularExpression) != nil, contents(out))
        let elsewhere = temp.appendingPathComponent("copied")
        try FileManager.default.createDirectory(at: elsewhere.appendingPathComponent(".git"), withIntermediateDirectories: true)
        try Data((String(repeating: "0", count: 40) + "\n").utf8).write(to: elsewhere.appendingPathComponent(".git/HEAD"))
        let copy = elsewhere.appendingPathComponent("speech-fetchd")
        try FileManager.default.copyItem(at: fetchdBinary, to: copy)
        let port = try freePort()
        let (daemon, _, log) = try launch(copy, ["--cache-base", cacheBase.path, "--workers", "1", "--metrics", "127.0.0.1:\(port)"],
                                          environment: environment(), hint: "copied-fetchd")
        XCTAssertTrue(waitUntil(timeout: 15) { self.contents(log).contains("serving metrics at http://127.0.0.1:\(port)/metrics") },
                      contents(log))
        let page = body(exchange("GET /metrics HTTP/1.0\r\n\r\n", port: port))
        let info = page.split(separator: "\n").first { $0.hasPrefix("speech_fetchd_build_info{") }.map(String.init) ?? page
        XCTAssertTrue(info.contains("commit=\"\(commit)\""), "the copy's build_info names \(commit): \(info)")
        XCTAssertEqual(kill(daemon.processIdentifier, SIGTERM), 0)
        XCTAssertTrue(waitForExit(daemon, timeout: 15))
    }

    /// A connected socket to 127.0.0.1:`port` (-1 when the connection failed).
    func connectTo(_ port: UInt16) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = port.bigEndian
        sa.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if !connected { close(fd); return -1 }
        return fd
    }

    func testNeitherASlowClientNorThirtyIdleOnesKeepAScrapeWaiting() throws {
        let port = try freePort()
        _ = try startMetricsDaemon(port: port, workers: 1)
        // One client sends its head a byte every 1.9 s (each read within a per-read limit of 2 s).
        let slow = connectTo(port)
        XCTAssertGreaterThanOrEqual(slow, 0)
        defer { close(slow) }
        let stopSlow = expectation(description: "the slow client stopped")
        let slowDone = NSLock()
        nonisolated(unsafe) var stopping = false
        Thread.detachNewThread {
            for byte in Array("GET /metrics HTTP/1.1\r\n\r\n".utf8) {
                if slowDone.withLock({ stopping }) { break }
                var b = byte
                if send(slow, &b, 1, Int32(MSG_NOSIGNAL)) != 1 { break }
                Thread.sleep(forTimeInterval: 1.9)
            }
            stopSlow.fulfill()
        }
        // Thirty connect and say nothing; they stay connected through the scrapes below.
        let idle = (0..<30).map { _ in connectTo(port) }
        defer { for fd in idle where fd >= 0 { close(fd) } }
        XCTAssertTrue(idle.allSatisfy { $0 >= 0 }, "thirty idle connections")
        // exchange gives up after 10 s of silence: served one connection at a time, the idle
        // ones alone held a scrape for 30 x 2 s.
        for _ in 0..<3 {
            let answer = exchange("GET /metrics HTTP/1.1\r\n\r\n", port: port)
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 ") && answer.contains("speech_fetchd_"), "a scrape is answered while they wait: \(answer)")
        }
        slowDone.withLock { stopping = true }
        wait(for: [stopSlow], timeout: 5)
    }

    func testARequestHeadPastTheLimitGetsA400NotAReset() throws {
        let port = try freePort()
        _ = try startMetricsDaemon(port: port, workers: 1)
        // A well-formed request whose head is 9 KiB (a header past the 8 KiB limit).
        let request = "GET /metrics HTTP/1.1\r\nX-Filler: " + String(repeating: "x", count: 9 << 10) + "\r\n\r\n"
        for _ in 0..<5 {
            let answer = exchange(request, port: port)
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 400 ") && answer.contains("at most 8 KiB"), "a 400 saying the limit: \(answer)")
        }
    }

    func testAddressesThatCannotBeServedAreRefusedClearly() throws {
        for bad in ["nonsense", "127.0.0.1:99999", "example.com:9464", "127.0.0.1:", ":x", "[::1]9464", "0"] {
            let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--metrics", bad], environment: environment(), hint: "bad")
            XCTAssertTrue(waitForExit(p, timeout: 15))
            XCTAssertEqual(p.terminationStatus, 64, "--metrics \(bad)")
            XCTAssertTrue(contents(err).contains("--metrics needs ADDR:PORT") && contents(err).contains("'\(bad)'"), contents(err))
        }
        // A port another process listens on: the daemon does not start, and says why.
        let port = try freePort()
        _ = try startMetricsDaemon(port: port, workers: 1)
        let other = cacheBase.appendingPathComponent("other")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", other.path, "--metrics", "127.0.0.1:\(port)"],
                                     environment: environment(), hint: "taken")
        XCTAssertTrue(waitForExit(p, timeout: 15))
        XCTAssertEqual(p.terminationStatus, 1)
        XCTAssertTrue(contents(err).contains("another process listens there: give --metrics another port"), contents(err))
    }
}
