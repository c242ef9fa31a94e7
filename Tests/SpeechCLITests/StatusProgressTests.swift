// `speech status` while bytes arrive: a daemon-served request's bytes move within a range (this
// node's workers' bytes in flight, kept in RAM), with a rate and an ETA; a download running
// without the daemon is listed from its staging lock and sidecar.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class StatusProgressTests: DaemonTestCase {
    let repo = "org/Watched"
    let file = "model.safetensors"
    let range = 2 << 20

    /// 4 MiB in two 2 MiB ranges, served at 512 KiB/s per connection: each range takes 4 s.
    func slowEnvironment() throws -> [String: String] {
        try TestHub.generateRepo(root: root, repo: repo, files: [file: 2 * range])
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: "\(repo)/\(file)")
        return ["HF_DOWNLOAD_RANGE_CHUNK": "\(range)"]
    }

    func status() throws -> [String: Any] {
        let (p, out, err) = try speech(["status", "--json", "--cache-base", cacheBase.path], hint: "status")
        XCTAssertTrue(waitForExit(p, timeout: 30))
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contents(out).utf8)) as? [String: Any], contents(out))
    }

    /// The first entry of `list` in `speech status --json` once it counts some bytes (`message`
    /// when none does within 20 s).
    func firstEntryWithBytes(in list: String, _ message: String) -> [String: Any] {
        var seen: [String: Any] = [:]
        XCTAssertTrue(waitUntil(timeout: 20, interval: 0.1) {
            guard let entry = ((try? self.status())?[list] as? [[String: Any]])?.first,
                  let bytes = entry["bytes"] as? Int, bytes > 0 else { return false }
            seen = entry
            return true
        }, "\(message): \(seen)")
        return seen
    }

    func testADaemonServedRequestShowsBytesWithinARangeWithARateAndAnETA() throws {
        let extra = try slowEnvironment()
        try startDaemon(workers: 1, slots: 1, extra: extra)
        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path], extra: extra, hint: "client")
        let seen = firstEntryWithBytes(in: "requests", "status shows the request's bytes before a range is whole")
        let bytes = try XCTUnwrap(seen["bytes"] as? Int)
        XCTAssertLessThan(bytes, range, "one range is in flight (1 worker × 1 slot) and counted as its bytes arrive: \(seen)")
        XCTAssertEqual(seen["totalBytes"] as? Int, 2 * range)
        XCTAssertEqual(seen["state"] as? String, "in flight")
        XCTAssertGreaterThan(seen["bytesPerSecond"] as? Int ?? 0, 0, "\(seen)")
        XCTAssertNotNil(seen["etaSeconds"] as? Int, "\(seen)")
        let percent = try XCTUnwrap(seen["percent"] as? Double)
        XCTAssertTrue(percent > 0 && percent < 50, "\(seen)")
        XCTAssertTrue(waitForExit(client, timeout: 60))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))
        XCTAssertTrue(waitUntil(timeout: 10) {
            ((try? self.status())?["requests"] as? [[String: Any]])?.first?["percent"] as? Double == 100
        }, "a done request is at 100 %")
        // The workers' records in RAM of ranges now published hold each its whole range (they go
        // `LiveProgress.landedSeconds` after it landed): none is left at a range's partial bytes.
        var info = stat()
        XCTAssertEqual(stat(spool.path, &info), 0)
        let records = "/dev/shm/speech-fetch-\(getuid())-\(info.st_dev)-\(info.st_ino)"
        XCTAssertTrue(FileManager.default.fileExists(atPath: records), "the workers kept their bytes in \(records)")
        // (Beside them: the machine's shared listings of ready jobs, `.ready*`, and of nodes, `.nodes*`,
        // and the spool's path, `.spool`, that tells a later sweep whether the spool still exists.)
        let left = ((try? FileManager.default.contentsOfDirectory(atPath: records)) ?? [])
            .filter { !$0.hasPrefix(".ready") && !$0.hasPrefix(".nodes") && $0 != ".spool" }
        for name in left {
            let size = (try? FileManager.default.attributesOfItem(atPath: "\(records)/\(name)")[.size] as? Int) ?? -1
            XCTAssertEqual(size, range, "\(name): a published range's record holds the whole range")
        }
    }

    func testADownloadWithoutTheDaemonIsListedFromItsStagingLock() throws {
        let extra = try slowEnvironment()
        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path], extra: extra, hint: "client")
        let seen = firstEntryWithBytes(in: "withoutDaemon", "status lists the embedded download with its bytes")
        XCTAssertEqual(seen["repo"] as? String, repo)
        XCTAssertEqual(seen["path"] as? String, file)
        XCTAssertEqual(seen["totalBytes"] as? Int, 2 * range)
        XCTAssertLessThan(seen["bytes"] as? Int ?? 0, 2 * range)
        XCTAssertTrue((seen["holder"] as? String ?? "").hasSuffix("@\(client.processIdentifier)"), "the lock names the downloading process: \(seen)")
        XCTAssertGreaterThan(seen["bytesPerSecond"] as? Int ?? 0, 0, "\(seen)")
        let (text, out, _) = try speech(["status", "--cache-base", cacheBase.path], hint: "status-text")
        XCTAssertTrue(waitForExit(text, timeout: 30))
        let printed = contents(out)
        XCTAssertTrue(printed.contains("without the daemon: 1") && printed.contains("\(repo) \(file)") && printed.contains("/s, ETA "),
                      printed)
        XCTAssertTrue(waitForExit(client, timeout: 60))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))
        XCTAssertNil((try status()["withoutDaemon"] as? [[String: Any]])?.first, "nothing is listed once it finished")
    }

    func testACappedDownloadWithoutTheDaemonShowsItsBytesMoveAtEveryLook() throws {
        // 12 MiB in ranges of 4 MiB at --max-rate 2M: each range is in flight for two seconds,
        // and the sidecar's heads (what `speech status` reads) must follow its bytes meanwhile.
        let size = 12 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [file: size])
        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path, "--max-rate", "2M"],
                                                extra: ["HF_DOWNLOAD_RANGE_CHUNK": "\(4 << 20)"], hint: "client")
        let started = Date()
        var looks: [(Double, Int)] = []
        while client.isRunning {
            guard let entry = ((try? status())?["withoutDaemon"] as? [[String: Any]])?.first,
                  let bytes = entry["bytes"] as? Int else { continue }
            looks.append((Date().timeIntervalSince(started), bytes))
        }
        XCTAssertTrue(waitForExit(client, timeout: 30))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))
        let shown = looks.map { String(format: "%.2f s %d", $0.0, $0.1) }.joined(separator: ", ")
        print("status of a capped download: \(shown)")
        XCTAssertGreaterThanOrEqual(looks.count, 3, "status listed the download while it ran: \(shown)")
        // Each look (a `speech status` process, most of a second on a loaded machine) shows more
        // bytes than the one before, until all of them are in.
        for (before, after) in zip(looks, looks.dropFirst()) where before.1 < size {
            XCTAssertGreaterThan(after.1, before.1, "status froze while capped bytes arrived: \(shown)")
        }
    }

    /// `speech status --watch [--json] --cache-base …` with its stdout on a pipe, each line stamped.
    func watch(_ extra: [String]) throws -> (Process, StampedLines) {
        try speechStamped(["status", "--watch", "--cache-base", cacheBase.path] + extra)
    }

    func testWatchPrintsALineASecondWhilePipedAndCtrlCEndsItWithExitZero() throws {
        let extra = try slowEnvironment()
        let (client, _, clientErr) = try speech(["download", repo, "--cache-base", cacheBase.path], extra: extra, hint: "client")
        let (p, lines) = try watch([])
        XCTAssertTrue(waitUntil(timeout: 15) { lines.all.filter { $0.text.contains("without the daemon") }.count >= 3 },
                      "a line a second while the download runs: \(lines.all.map(\.text))")
        let signalled = Date()
        XCTAssertEqual(kill(p.processIdentifier, SIGINT), 0)
        XCTAssertTrue(waitForExit(p, timeout: 10))
        XCTAssertLessThan(Date().timeIntervalSince(signalled), 1.5, "Ctrl-C ends the watch at once")
        XCTAssertEqual(p.terminationStatus, 0, "Ctrl-C is how a watch ends: exit 0")
        let shown = lines.all
        print("status --watch: " + shown.map(\.text).joined(separator: " | "))
        let gaps = zip(shown.dropFirst(), shown).map { $0.time.timeIntervalSince($1.time) }
        XCTAssertTrue(gaps.allSatisfy { $0 > 0.5 && $0 < 2.5 }, "one line a second: \(gaps)")
        XCTAssertTrue(shown.contains { $0.text.contains("1 without the daemon:") && $0.text.contains("/s, ETA ") },
                      "the download's bytes, rate and ETA: \(shown.map(\.text))")
        XCTAssertTrue(waitForExit(client, timeout: 60))
        XCTAssertEqual(client.terminationStatus, 0, contents(clientErr))

        let (json, objects) = try watch(["--json"])
        XCTAssertTrue(waitUntil(timeout: 15) { objects.all.count >= 2 }, "\(objects.all.map(\.text))")
        kill(json.processIdentifier, SIGINT)
        XCTAssertTrue(waitForExit(json, timeout: 10))
        XCTAssertEqual(json.terminationStatus, 0)
        for line in objects.all {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.text.utf8)) as? [String: Any], line.text)
            XCTAssertNotNil(object["requests"] as? [Any], line.text)
            XCTAssertNotNil(object["withoutDaemon"] as? [Any], line.text)
        }
        XCTAssertTrue(objects.all.last?.text.contains("\"withoutDaemon\":[]") ?? false, "nothing in flight once it finished")
    }
}

