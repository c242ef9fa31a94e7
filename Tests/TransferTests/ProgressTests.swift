// Progress under a rate cap: the Swift callback hears of bytes as they arrive, capped or not,
// embedded and daemon-hosted; a call the cache answers whole still ends at 1.0; a Ctrl-C that
// lands once every file is final does not turn a finished download into a cancelled one.
import Foundation
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class ProgressTests: DaemonTestCase {
    let repo = "org/Capped"
    /// 6 MiB at 2 MiB/s: three seconds of capped transfer.
    let size = 6 << 20

    /// Ranges as big as a user's default (the fixture's 256 KiB ranges end too soon to show a
    /// connection holding the loop): two ranges of 4 and 2 MiB.
    var capped: [String: String] { ["HF_DOWNLOAD_RANGE_CHUNK": "\(4 << 20)", "SPEECH_FETCH_MAX_RATE": "2M"] }

    func testTheCallbackHearsOfCappedBytesAtLeastEverySecondEmbedded() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let log = StampedProgress()
        try download(repo, extra: capped, progress: { log.add($0) })
        try assertSameBytes(repo, "model.safetensors")
        assertNoLongSilence(log.all, total: Int64(size))
    }

    func testTheCallbackHearsOfCappedBytesAtLeastEverySecondDaemonHosted() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        try startDaemon(workers: 1, slots: 2, extra: ["HF_DOWNLOAD_RANGE_CHUNK": "\(4 << 20)"], arguments: ["--max-rate", "2M"])
        let log = StampedProgress()
        let result = try download(repo, extra: ["HF_DOWNLOAD_RANGE_CHUNK": "\(4 << 20)"], progress: { log.add($0) })
        XCTAssertTrue(result.handedOver, "the daemon's workers fetched it")
        try assertSameBytes(repo, "model.safetensors")
        assertNoLongSilence(log.all, total: Int64(size))
    }

    func testACallTheCacheAnswersWholeEndsItsProgressAtOne() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 300_000])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{}".utf8)])
        try download(repo)
        // Online (the Hub says nothing changed), offline, and with the Hub gone (the fallback):
        // each call's callback hears one event with every file and byte done.
        for (name, offline, endpoint) in [("online", false, nil), ("offline", true, nil), ("unreachable Hub", false, "http://127.0.0.1:9")] {
            let log = StampedProgress()
            let result = try download(repo, offline: offline, endpoint: endpoint, progress: { log.add($0) })
            XCTAssertEqual(result.fetched, [], name)
            guard let last = log.all.last?.progress else { XCTFail("\(name): no progress event at all"); continue }
            XCTAssertEqual(last.fraction, 1.0, name)
            XCTAssertEqual(last.completedBytes, 300_002, name)
            XCTAssertEqual(last.totalBytes, 300_002, name)
            XCTAssertEqual(last.filesDone, 2, name)
            XCTAssertEqual(last.filesTotal, 2, name)
        }
    }

    func testACancelThatLandsOnceEveryFileIsFinalIsAFinishedDownload() throws {
        // The cancel (Ctrl-C) is raised the instant the file is renamed into place, before the
        // engine's loop has collected it: the call returns what it fetched, not "interrupted".
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 2 << 20])
        let final = modelDir(repo).appendingPathComponent("model.safetensors").path
        let log = StampedProgress()
        let result = try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase, progress: { log.add($0) },
                                                       isCancelled: { FileManager.default.fileExists(atPath: final) })
        XCTAssertEqual(result.fetched, ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
        XCTAssertEqual(log.all.last?.progress.fraction, 1.0, "the last event says done")
        XCTAssertEqual(log.all.last?.progress.filesDone, 1)
    }

    /// Between the first byte counted and the event that reports every byte and file final, no
    /// more than a second passes without an event that counts more bytes or one more final file
    /// (at 2 MiB/s, every 0.1 s brings 200 KiB): the tail, from the last byte to the file
    /// reported final, is a gap like any other.
    func assertNoLongSilence(_ events: [(time: Date, progress: DownloadProgress)], total: Int64,
                             file: StaticString = #filePath, line: UInt = #line) {
        var moves: [(time: Date, bytes: Int64, files: Int)] = []
        for event in events where event.progress.completedBytes > 0
            && (event.progress.completedBytes > (moves.last?.bytes ?? 0) || event.progress.filesDone > (moves.last?.files ?? 0)) {
            moves.append((event.time, event.progress.completedBytes, event.progress.filesDone))
        }
        let final = events.last?.progress
        XCTAssertEqual(final?.completedBytes, total, "progress reaches the total", file: file, line: line)
        XCTAssertEqual(final?.fraction, 1.0, "the last event says done", file: file, line: line)
        XCTAssertEqual(final?.filesDone, final?.filesTotal, "the last event counts every file final", file: file, line: line)
        guard moves.count >= 2, let first = moves.first?.time, let last = moves.last?.time else {
            return XCTFail("progress moved \(moves.count) times", file: file, line: line)
        }
        let gaps = zip(moves.dropFirst(), moves).map { $0.time.timeIntervalSince($1.time) }
        let trace = moves.map { String(format: "%.2f s %lld (%d files)", $0.time.timeIntervalSince(first), $0.bytes, $0.files) }
            .joined(separator: ", ")
        print("capped progress: \(moves.count) moves over \(String(format: "%.2f", last.timeIntervalSince(first))) s, "
              + "longest silence \(String(format: "%.2f", gaps.max() ?? 0)) s: \(trace)")
        XCTAssertGreaterThan(last.timeIntervalSince(first), 1.5, "the cap held the transfer for seconds", file: file, line: line)
        XCTAssertLessThanOrEqual(gaps.max() ?? 0, 1.0, "progress froze while capped bytes arrived, or before the file was reported final: \(trace)",
                                 file: file, line: line)
    }
}

/// Progress events stamped with when they were heard.
final class StampedProgress: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [(time: Date, progress: DownloadProgress)] = []
    func add(_ p: DownloadProgress) { lock.withLock { events.append((Date(), p)) } }
    var all: [(time: Date, progress: DownloadProgress)] { lock.withLock { events } }
}
