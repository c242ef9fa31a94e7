// Native Xet downloads against the test Hub in Xet mode: reconstructions and xorb ranges over
// loopback, every chunk decoded and hashed, the Merkle root and the SHA-256 checked, the faults of
// the Xet path recovered, a corrupt stored chunk refused, the bridge only when Xet is off, and a
// SIGKILLed `speech download` resumed without fetching finished terms again.
import Digest
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class XetDownloadTests: HubTestCase {
    let repo = "org/XetModel"
    let path = "model.safetensors"
    var key: String { "\(repo)/\(path)" }

    /// A repo of one Xet-backed file of `size` random bytes and a small config.
    func makeRepo(size: Int = 3 << 20) throws { try writeXetRepo(repo, path, size: size) }

    /// Many terms from two xorbs (`writeManyTermXetRepo`).
    func makeManyTermRepo() throws { try writeManyTermXetRepo(repo, path) }

    /// Runs `speech download` of the file over one connection at `maxRate`, reads its sidecar
    /// until `seen` returns a value (30 s at most), then SIGKILLs it mid-file.
    func killDownloadMidFile<Seen>(maxRate: String, when seen: (Sidecar) -> Seen?) throws -> Seen? {
        let child = Process()
        child.executableURL = speechBinary
        child.arguments = ["download", repo, path, "--cache-base", cacheBase.path]
        child.environment = environment(extra: ["SPEECH_FETCH_MAX_RATE": maxRate, "HF_DOWNLOAD_RANGE_CONCURRENCY": "1"])
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try child.run()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL); child.waitUntilExit() } }
        let value = watchSidecar(repo, path, until: seen)
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationReason, .uncaughtSignal, "killed, not finished")
        XCTAssertFalse(finalFileExists(path))
        return value
    }

    func finalFileExists(_ name: String) -> Bool {
        FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(name).path)
    }

    func testAXetFileComesAsReconstructionAndXorbRangesByteIdenticalWithNoBridgeBytes() throws {
        try makeRepo()
        let log = ProgressLog()
        let result = try download(repo, progress: { log.add($0) })
        XCTAssertEqual(Set(result.fetched), [path, "config.json"])
        try assertXetRepoCameThroughXet(repo, path)
        // Progress is in bytes of the files, and ends at their sum.
        let last = try XCTUnwrap(log.all.last)
        XCTAssertEqual(last.completedBytes, Int64(3 << 20) + 8)
        XCTAssertEqual(last.totalBytes, last.completedBytes)
        XCTAssertTrue(log.all.allSatisfy { $0.completedBytes <= $0.totalBytes })
        // Nothing is left staged.
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(".incomplete").path))
    }

    func testACorruptStoredChunkIsFetchedOnceMoreThenFailsNamingTheFileAndNothingIsPutInPlace() throws {
        try makeRepo()
        hub.setFault(.corruptChunk(chunk: 7), for: key)
        XCTAssertThrowsError(try download(repo)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains(path), text)
            XCTAssertTrue(text.contains("fetched again"), text)
        }
        XCTAssertEqual(hub.reconstructions(for: key), 2, "fetched once, then once more from scratch")
        XCTAssertFalse(finalFileExists(path))
        let staged = (try? FileManager.default.contentsOfDirectory(atPath: ModelDirectory(modelDir(repo)).stagingDirectory.path)) ?? []
        XCTAssertFalse(staged.contains { $0.hasPrefix(path) && !$0.hasSuffix(".lock") }, "no staged bytes kept: \(staged)")
        XCTAssertTrue(finalFileExists("config.json"), "the other files of the set go on")
    }

    func testAChunkCorruptOnlyOnTheFirstServeIsHealedByTheRefetch() throws {
        try makeRepo()
        hub.setFault(.corruptChunk(chunk: 3), for: key)
        let reconstructions = Counter()
        let hub = self.hub!
        hub.observeRequests { line, _ in
            if line.contains("/reconstructions/"), reconstructions.increment() == 2 { hub.clearFaults() }
        }
        try download(repo)
        hub.observeRequests(nil)
        try assertSameBytes(repo, path)
        XCTAssertEqual(hub.reconstructions(for: key), 2)
    }

    func testFaultsOnReconstructionsAndXorbRangesAreRetried() throws {
        try makeRepo()
        let faults: [Fault] = [
            .reconstructionStatus(code: 503, times: 2, retryAfter: nil),
            .reconstructionStall(seconds: 2.5, times: 1),  // past the 1 s stall guard
            .xorbStatus(code: 500, times: 2, retryAfter: nil),
            .xorbStall(afterBytes: 200_000, seconds: 2.5, times: 1),  // past the 1 s stall guard
            .xorbTruncated(missingBytes: 100_000, times: 2),
        ]
        func asked(_ route: String) -> Int { hub.requestLog().filter { $0.contains(route) }.count }
        for (n, fault) in faults.enumerated() {
            try? FileManager.default.removeItem(at: modelDir(repo))
            hub.resetCounters()
            let (reconstructions, xorbs) = (asked("/reconstructions/"), asked("/xorbs/"))
            hub.setFault(fault, for: key)
            try download(repo)
            try assertSameBytes(repo, path)
            XCTAssertEqual(hub.bridgeBytes(for: key), 0, "\(fault)")
            // Unfaulted, the file is one reconstruction and one xorb range: the fault was met and retried.
            if n < 2 {
                XCTAssertGreaterThan(asked("/reconstructions/") - reconstructions, 1, "\(fault)")
            } else {
                XCTAssertGreaterThan(asked("/xorbs/") - xorbs, 1, "\(fault)")
            }
            hub.clearFaults()
        }
    }

    func testACASWithoutV2ReconstructionsIsAskedForV1() throws {
        try makeRepo()
        hub.setFault(.reconstructionStatus(code: 404, times: 1, retryAfter: nil), for: key)
        try download(repo)
        try assertSameBytes(repo, path)
        let asked = hub.requestLog().filter { $0.contains("/reconstructions/") }
        XCTAssertEqual(asked.count, 2, "\(asked)")
        XCTAssertTrue(asked[0].contains("/v2/") && asked[1].contains("/v1/"), "\(asked)")
    }

    func testAnExpiredTokenIsRefreshedMidFile() throws {
        try makeManyTermRepo()
        // A token the CAS refuses once (401), and tokens that live less than the refresh margin:
        // each reconstruction asks for a fresh one.
        hub.setFault(.xetTokenExpired(times: 1), for: key)
        hub.xetTokenLifetime = 20
        try download(repo, include: [path], extra: ["SPEECH_FETCH_XET_PAGE": "\(256 << 10)"])
        try assertSameBytes(repo, path)
        let tokens = hub.requestLog().filter { $0.contains("/xet-read-token/") }.count
        XCTAssertGreaterThanOrEqual(tokens, 3, "the first token, one after the 401, one per later page")
    }

    func testAXetFileLandsInAHuggingFaceHubCacheAsABlob() throws {
        try makeRepo()
        let hubCache = temp.appendingPathComponent("hf-hub")
        let result = try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase, huggingFaceCache: hubCache)
        try assertXetFileIsAHubCacheBlob(repo, path, in: result.directory, hubCache: hubCache)
    }

    func testHFHubDisableXetTakesTheBridge() throws {
        try makeRepo()
        try download(repo, extra: ["HF_HUB_DISABLE_XET": "1"])
        try assertBridgedOnly(repo, path, size: 3 << 20)
    }

    func testALargeFileReconstructionComesInPagesAndItsTermsFromSeveralRanges() throws {
        try makeManyTermRepo()
        try download(repo, include: [path], extra: ["SPEECH_FETCH_XET_PAGE": "\(1 << 20)"])
        try assertSameBytes(repo, path)
        XCTAssertGreaterThanOrEqual(hub.reconstructions(for: key), 4, "4 MiB in pages of 1 MiB")
        XCTAssertGreaterThan(hub.xorbRangeRequests(for: key), 8)
        XCTAssertEqual(hub.bridgeBytes(for: key), 0)
        XCTAssertFalse(finalFileExists("base.safetensors"))
    }

    func testAKilledDownloadResumesWithoutFetchingFinishedTermsAgain() throws {
        try makeManyTermRepo()
        // One connection at 512 KiB/s: about 8 s for the file, so the kill lands mid-file.
        let recorded = try XCTUnwrap(killDownloadMidFile(maxRate: "512K") { record in
            (record.xet?.terms).flatMap { $0.count >= 5 ? $0 : nil }
        }, "terms were recorded before the kill")

        let before = hub.xorbBytes(for: key)
        try download(repo, include: [path])
        try assertSameBytes(repo, path)
        let resumed = hub.xorbBytes(for: key) - before
        let whole = try xorbBytesOfAFreshDownload(repo, path)
        let recordedBytes = recorded.reduce(0) { $0 + $1.byteEnd - $1.byteStart + 1 }
        print("xet resume: \(before) xorb bytes before the kill, \(resumed) after, \(whole) for the whole file; "
              + "\(recorded.count) terms of \(recordedBytes) bytes recorded")
        XCTAssertLessThanOrEqual(resumed, whole - recordedBytes + 8 * 1024,
                                 "the resume fetched \(resumed) of \(whole) xorb bytes; \(recorded.count) terms (\(recordedBytes) bytes) were recorded")
        XCTAssertLessThanOrEqual(before + resumed, whole + (1 << 20), "at most the range in flight twice")
    }

    func testAKilledDownloadResumesInsideALongTerm() throws {
        try makeRepo(size: 8 << 20)  // random bytes: one term of one xorb
        let recorded = try XCTUnwrap(killDownloadMidFile(maxRate: "1M") { record in
            record.xet?.heads?.first.flatMap { $0.lengths.reduce(0, +) >= 2 << 20 ? $0 : nil }
        }, "the term's head was recorded before the kill")

        let before = hub.xorbBytes(for: key)
        try download(repo, include: [path])
        try assertSameBytes(repo, path)
        let resumed = hub.xorbBytes(for: key) - before
        let stored = recorded.byteEnd - recorded.byteStart + 1
        let whole = try xorbBytesOfAFreshDownload(repo, path)
        print("xet resume inside a term: \(before) xorb bytes before the kill, \(resumed) after, \(whole) for the whole file; "
              + "the recorded head held \(stored)")
        // (What the test Hub counts before the kill includes what sat unread in the socket
        // buffers, megabytes on loopback: the bound is on what the resume asked for.)
        XCTAssertLessThanOrEqual(resumed, whole - stored, "the resume asked only for the bytes after the recorded head")
    }
}

/// A counter bumped from the test Hub's connection threads.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() -> Int { lock.withLock { value += 1; return value } }
}
