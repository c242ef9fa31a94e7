// `speech download --max-rate` and `speech-fetchd --max-rate`: one cap over all of a call's (or a
// node's) connections, measured on the bytes that reach the disk, against the test Hub over
// loopback; and the rates they refuse.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class MaxRateTests: DaemonTestCase {
    let repo = "org/Capped"

    /// Runs `speech download … --json` and stamps each stdout line with when it arrived.
    func downloadStamped(_ arguments: [String]) throws -> (Process, StampedLines) {
        try speechStamped(["download", repo, "--json", "--cache-base", cacheBase.path] + arguments)
    }

    /// The rate the disk saw while bytes arrived: the least-squares slope of bytes over time
    /// through every progress event (one every 0.1 s) that counted some bytes but not all, so
    /// that neither the process start, the Hub's listing and the final verification, nor the
    /// jitter of one event's arrival, decide it.
    func measuredRate(_ lines: StampedLines, total: Int) -> Double? {
        let samples = lines.all.compactMap { line -> (Double, Double)? in
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.text.utf8)) as? [String: Any],
                  event["event"] as? String == "progress", let bytes = event["completedBytes"] as? Int,
                  bytes > 0, bytes < total else { return nil }
            return (line.time.timeIntervalSinceReferenceDate, Double(bytes))
        }
        guard samples.count >= 5 else { return nil }
        let n = Double(samples.count)
        let meanT = samples.reduce(0) { $0 + $1.0 } / n, meanB = samples.reduce(0) { $0 + $1.1 } / n
        let covariance = samples.reduce(0) { $0 + ($1.0 - meanT) * ($1.1 - meanB) }
        let variance = samples.reduce(0) { $0 + ($1.0 - meanT) * ($1.0 - meanT) }
        return variance > 0 ? covariance / variance : nil
    }

    func testMaxRateHoldsTheWholeCallWithinTenPercentOfTheCap() throws {
        let size = 6 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        // 24 ranges of 256 KiB over 4 connections (environment()): the cap is the sum of them all.
        let started = Date()
        let (p, lines) = try downloadStamped(["--max-rate", "2M"])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the capped download ends")
        let wall = Date().timeIntervalSince(started)
        XCTAssertEqual(p.terminationStatus, 0, lines.all.map(\.text).joined(separator: "\n"))
        try assertSameBytes(repo, "model.safetensors")
        guard let rate = measuredRate(lines, total: size) else {
            return XCTFail("no progress events to measure: \(lines.all.map(\.text))")
        }
        let cap = Double(2 << 20)
        print("--max-rate 2M: \(String(format: "%.3f", rate / 1_048_576)) MiB/s while bytes arrived (\(String(format: "%+.1f", (rate / cap - 1) * 100)) %), "
              + "\(String(format: "%.3f", Double(size) / wall / 1_048_576)) MiB/s over the whole call of \(String(format: "%.2f", wall)) s")
        XCTAssertEqual(rate / cap, 1, accuracy: 0.10, "measured \(rate) B/s against a cap of \(cap) B/s")
    }

    func testTheDaemonsCapHoldsAllItsWorkerProcessesTogetherWithinTenPercent() throws {
        // 12 MiB (6 s at the cap): a daemon-served call reports progress on a half-second tick as
        // parts land, a staircase of 256 KiB steps; six seconds of it give the fit enough points.
        let size = 12 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        // Two worker processes of two ranges each: four connections in two processes, one cap.
        let (daemon, _, log) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "2", "--slots", "2", "--max-rate", "2M"],
                                          environment: environment(), hint: "fetchd")
        XCTAssertTrue(waitUntil(timeout: 15) {
            self.supervisorPid() == daemon.processIdentifier && self.descendants(of: daemon.processIdentifier).count >= 2
        }, "speech-fetchd serves the base; log:\n\(contents(log))")
        XCTAssertTrue(contents(log).contains("capping the node's downloads at 2.0 MiB/s"), contents(log))
        let schedule = "/dev/shm/speech-fetchd-rate-\(getuid())-\(daemon.processIdentifier)"
        XCTAssertTrue(FileManager.default.fileExists(atPath: schedule), "the node's schedule is in RAM")

        let (p, lines) = try downloadStamped([])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the capped download ends")
        XCTAssertEqual(p.terminationStatus, 0, lines.all.map(\.text).joined(separator: "\n") + contents(log))
        XCTAssertTrue(lines.all.contains { $0.text.contains("\"event\":\"daemon\"") }, "the daemon's workers fetched it")
        try assertSameBytes(repo, "model.safetensors")
        guard let rate = measuredRate(lines, total: size) else {
            return XCTFail("no progress events to measure: \(lines.all.map(\.text))")
        }
        let cap = Double(2 << 20)
        print("speech-fetchd --max-rate 2M, 2 workers x 2 slots: \(String(format: "%.3f", rate / 1_048_576)) MiB/s while bytes arrived (\(String(format: "%+.1f", (rate / cap - 1) * 100)) %)")
        XCTAssertEqual(rate / cap, 1, accuracy: 0.10, "measured \(rate) B/s against the node's cap of \(cap) B/s")

        XCTAssertEqual(kill(daemon.processIdentifier, SIGTERM), 0)
        XCTAssertTrue(waitForExit(daemon, timeout: 15))
        XCTAssertFalse(FileManager.default.fileExists(atPath: schedule), "a drained daemon removes its schedule")
    }

    func testACappedCallFetchesInItsOwnProcessWhileADaemonServesTheBase() throws {
        let size = 2 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        try startDaemon(workers: 1)
        let (p, lines) = try downloadStamped(["--max-rate", "4M"])
        XCTAssertTrue(waitForExit(p, timeout: 30))
        XCTAssertEqual(p.terminationStatus, 0, lines.all.map(\.text).joined(separator: "\n"))
        try assertSameBytes(repo, "model.safetensors")
        XCTAssertFalse(lines.all.contains { $0.text.contains("\"event\":\"daemon\"") },
                       "a capped call is not handed to the daemon, whose workers fetch at the node's rate: \(lines.all.map(\.text))")
        XCTAssertEqual(names("requests").filter { $0.hasSuffix(".json") }, [], "no request reached the spool")
    }

    /// The longest time between two `--json` lines that moved, from the first byte counted to the
    /// `done` line: a progress or file event that counted more bytes or one more final file (the
    /// tail, from the last byte to the file reported final, is a gap like any other), then `done`.
    /// Nil unless a final event counted every byte and file, and `done` followed it.
    func longestSilence(_ lines: StampedLines, total: Int) -> (gap: Double, moves: Int, trace: String)? {
        var moves: [(time: Date, bytes: Int, files: Int)] = []
        var finished = false
        for line in lines.all {
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.text.utf8)) as? [String: Any] else { continue }
            if event["event"] as? String == "done" {
                guard finished else { return nil }
                moves.append((line.time, total, moves.last?.files ?? 0))
                break
            }
            guard let bytes = event["completedBytes"] as? Int, bytes > 0, let files = event["filesDone"] as? Int,
                  let filesTotal = event["filesTotal"] as? Int,
                  bytes > (moves.last?.bytes ?? 0) || files > (moves.last?.files ?? 0) else { continue }
            moves.append((line.time, bytes, files))
            finished = bytes == total && files == filesTotal
        }
        guard moves.count >= 2, finished, let first = moves.first?.time else { return nil }
        let trace = moves.map { String(format: "%.2f s %d (%d files)", $0.time.timeIntervalSince(first), $0.bytes, $0.files) }
        return (zip(moves.dropFirst(), moves).map { $0.time.timeIntervalSince($1.time) }.max() ?? 0, moves.count,
                trace.joined(separator: ", "))
    }

    func testJSONProgressUnderACapMovesAtLeastEverySecond() throws {
        // Ranges of 4 MiB (a user's are 8): one connection's range takes seconds at the cap.
        let size = 6 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let (p, lines) = try speechStamped(["download", repo, "--json", "--cache-base", cacheBase.path, "--max-rate", "2M"],
                                           extra: ["HF_DOWNLOAD_RANGE_CHUNK": "\(4 << 20)"])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the capped download ends")
        XCTAssertEqual(p.terminationStatus, 0, lines.all.map(\.text).joined(separator: "\n"))
        try assertSameBytes(repo, "model.safetensors")
        XCTAssertTrue(waitUntil(timeout: 5) { self.lines(lines, contain: "\"event\":\"done\"") })
        guard let silence = longestSilence(lines, total: size) else {
            return XCTFail("progress never reached the total and every file final before done: \(lines.all.map(\.text))")
        }
        print("--json --max-rate 2M: \(silence.moves) progress events that moved, longest silence \(String(format: "%.2f", silence.gap)) s: \(silence.trace)")
        XCTAssertLessThanOrEqual(silence.gap, 1.0, "progress froze while capped bytes arrived, or before the file was reported final: \(silence.trace)")
    }

    func testJSONProgressOfADaemonServedDownloadUnderTheNodesCapMovesAtLeastEverySecond() throws {
        // The same, handed to a speech-fetchd capped at 2M: its workers' bytes in flight (RAM)
        // must reach the waiter's events between parts, which land only every two seconds.
        let size = 6 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let ranges = ["HF_DOWNLOAD_RANGE_CHUNK": "\(4 << 20)"]
        try startDaemon(workers: 1, slots: 2, extra: ranges, arguments: ["--max-rate", "2M"])
        let (p, lines) = try speechStamped(["download", repo, "--json", "--cache-base", cacheBase.path], extra: ranges)
        XCTAssertTrue(waitForExit(p, timeout: 30), "the capped download ends")
        XCTAssertEqual(p.terminationStatus, 0, lines.all.map(\.text).joined(separator: "\n"))
        XCTAssertTrue(self.lines(lines, contain: "\"event\":\"daemon\""), "the daemon's workers fetched it: \(lines.all.map(\.text))")
        try assertSameBytes(repo, "model.safetensors")
        guard let silence = longestSilence(lines, total: size) else {
            return XCTFail("progress never reached the total and every file final before done: \(lines.all.map(\.text))")
        }
        print("--json, daemon-served under speech-fetchd --max-rate 2M: \(silence.moves) progress events that moved, longest silence \(String(format: "%.2f", silence.gap)) s: \(silence.trace)")
        XCTAssertGreaterThanOrEqual(silence.moves, 4, "bytes counted as they arrived, not per part: \(lines.all.map(\.text))")
        XCTAssertLessThanOrEqual(silence.gap, 1.0, "progress froze while capped bytes arrived, or before the file was reported final: \(silence.trace)")
    }

    func testASmallFileOfACappedCallIsFinalBeforeTheBigFileIsHalfDone() throws {
        // Three ranges of 4 MiB and a 39-byte config.json at 4M, all four in flight at once
        // (environment(): 4 connections): the loop must see the small file's end while the
        // ranges are read, not once every one of them is whole.
        let size = 12 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{\"model_type\": \"capped\"}\n".padding(toLength: 39, withPad: " ", startingAt: 0).utf8)])
        let (p, lines) = try speechStamped(["download", repo, "--json", "--cache-base", cacheBase.path, "--max-rate", "4M"],
                                           extra: ["HF_DOWNLOAD_RANGE_CHUNK": "\(4 << 20)"])
        XCTAssertTrue(waitForExit(p, timeout: 30), "the capped download ends")
        XCTAssertEqual(p.terminationStatus, 0, lines.all.map(\.text).joined(separator: "\n"))
        try assertSameBytes(repo, "config.json")
        let small = lines.all.compactMap { line -> Int? in
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.text.utf8)) as? [String: Any],
                  event["event"] as? String == "file", event["completedFile"] as? String == "config.json" else { return nil }
            return event["completedBytes"] as? Int
        }.first
        let counted = try XCTUnwrap(small, "no file event for config.json: \(lines.all.map(\.text))")
        print("--max-rate 4M: config.json final with \(counted) of \(size + 39) bytes counted")
        XCTAssertLessThan(counted, size / 2, "the small file is final before the big file is half done, not after all its ranges")
    }

    func testCtrlCStopsACappedDownloadAtOnce() throws {
        // Two ranges of 8 MiB (a user's size) at 2M: a connection holds its range for seconds.
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 16 << 20])
        let (p, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path, "--max-rate", "2M"],
                                     extra: ["HF_DOWNLOAD_RANGE_CHUNK": "\(8 << 20)"], hint: "interrupted")
        let staged = modelDir(repo).appendingPathComponent(".incomplete").path
        XCTAssertTrue(waitUntil(timeout: 15) { FileManager.default.fileExists(atPath: staged) }, "the transfer started")
        Thread.sleep(forTimeInterval: 1)
        let signalled = Date()
        XCTAssertEqual(kill(p.processIdentifier, SIGINT), 0)
        XCTAssertTrue(waitForExit(p, timeout: 30))
        let took = Date().timeIntervalSince(signalled)
        print("Ctrl-C of a download capped at 2M: exited after \(String(format: "%.2f", took)) s")
        XCTAssertEqual(p.terminationStatus, 130, contents(err))
        XCTAssertLessThan(took, 2.5, "a capped download stops within a moment of Ctrl-C")
        XCTAssertTrue(contents(err).contains("interrupted"), contents(err))
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("model.safetensors").path),
                       "the cancel stopped the transfer; it did not finish it uncapped")
        XCTAssertTrue(FileManager.default.fileExists(atPath: staged), "what was fetched stays staged")
    }

    func lines(_ lines: StampedLines, contain text: String) -> Bool { lines.all.contains { $0.text.contains(text) } }

    func testRatesThatAreNotRatesAreUsageErrorsNamingTheOption() throws {
        for bad in ["20MB", "fast", "0", "-5M", "1.5.0M", "M", "100", "2M/s"] {
            let (p, _, err) = try speech(["download", repo, "--max-rate", bad, "--cache-base", cacheBase.path], hint: "bad-rate")
            XCTAssertTrue(waitForExit(p, timeout: 15))
            XCTAssertEqual(p.terminationStatus, 64, "--max-rate \(bad)")
            let message = contents(err)
            XCTAssertTrue(message.contains("--max-rate") && message.contains("'\(bad)'") && message.contains("20M"),
                          "the error names the option, the value and a good example: \(message)")
        }
        let (p, _, err) = try speech(["download", repo, "--max-rate", "2M", "--detach", "--cache-base", cacheBase.path], hint: "detach-rate")
        XCTAssertTrue(waitForExit(p, timeout: 15))
        XCTAssertEqual(p.terminationStatus, 64)
        XCTAssertTrue(contents(err).contains("speech-fetchd --max-rate"), contents(err))
        for bad in ["20MB", "0"] {
            let (d, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--max-rate", bad], environment: environment(), hint: "fetchd-bad")
            XCTAssertTrue(waitForExit(d, timeout: 15))
            XCTAssertEqual(d.terminationStatus, 64, "speech-fetchd --max-rate \(bad)")
            XCTAssertTrue(contents(err).contains("--max-rate") && contents(err).contains("'\(bad)'"), contents(err))
        }
    }
}
