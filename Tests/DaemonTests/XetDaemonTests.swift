// Xet-backed files handed to speech-fetchd: one Xet job per file, claimed by a real worker process
// that fetches the reconstruction and xorb ranges natively with its node's credential, verifies
// the Merkle root and SHA-256 and finalizes; a corrupt stored chunk fails the request naming the
// file; revision 2 is read mostly from revision 1 through the cache base's chunk index; and a
// SIGKILLed worker's next claimant resumes from the sidecar's Xet record.
import Digest
import Foundation
import ModelCache
import SpeechFetch
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class XetDaemonTests: DaemonTestCase {
    let repo = "org/XetDaemon"
    let path = "model.safetensors"
    var key: String { "\(repo)/\(path)" }

    /// A repo of one Xet-backed file of `size` random bytes and a small config (plain bytes).
    func makeRepo(size: Int = 3 << 20, seed: UInt64 = 1) throws { try writeXetRepo(repo, path, size: size, seed: seed) }

    /// The spool's folders a settled request leaves empty.
    func assertSpoolSettled(file: StaticString = #filePath, line: UInt = #line) {
        waitUntil(timeout: 2) { self.names("jobs/claimed").isEmpty && self.names("plans").isEmpty }
        XCTAssertEqual(names("jobs/ready"), [], file: file, line: line)
        XCTAssertEqual(names("jobs/claimed"), [], file: file, line: line)
        XCTAssertEqual(names("plans"), [], file: file, line: line)
        XCTAssertEqual(names("parts"), [], "a Xet job has no part", file: file, line: line)
    }

    func testADaemonHostedXetFileComesAsReconstructionAndXorbRangesByteIdenticalWithNoBridgeBytes() throws {
        try makeRepo()
        let daemon = try startDaemon(workers: 2, slots: 2)
        let result = try download(repo)
        XCTAssertTrue(result.handedOver, "a daemon serves the base: the call hands its request over")
        try assertXetRepoCameThroughXet(repo, path, "; daemon log:\n\(contents(daemon.log))")
        XCTAssertTrue(contents(daemon.log).contains("fetched natively from the Xet CAS"), contents(daemon.log))
        assertSpoolSettled()
        XCTAssertEqual(names("failed"), [])
        XCTAssertEqual(names("done").count, 1, "the request is marked done")
        // Verified and in place: the cache base's chunk index names it for the next revision.
        let index = cacheBase.appendingPathComponent("xet-index").path
        XCTAssertFalse(((try? FileManager.default.contentsOfDirectory(atPath: index)) ?? []).isEmpty, "the file is indexed")
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent(".incomplete/\(path)").path))
        // The spool never held a CAS token or a pre-signed xorb URL: the worker asked with its own credential.
        for sub in (try? FileManager.default.subpathsOfDirectory(atPath: spool.path)) ?? [] {
            guard let data = FileManager.default.contents(atPath: spool.appendingPathComponent(sub).path) else { continue }
            let text = String(decoding: data, as: UTF8.self)
            XCTAssertFalse(text.contains("/xorbs/") || text.contains("sig=") || text.contains("accessToken"), "spool/\(sub): \(text.prefix(200))")
        }
    }

    func testADaemonHostedXetFileLandsInAHuggingFaceHubCacheAsABlob() throws {
        try makeRepo()
        let hf = temp.appendingPathComponent("hf-hub")
        try startDaemon(workers: 1, slots: 2, arguments: ["--hf-cache", hf.path])
        XCTAssertTrue(waitUntil(timeout: 5) { self.names("").contains { $0.hasSuffix(".hf-caches") } }, "the daemon says what it serves")
        let result = try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase, huggingFaceCache: hf)
        XCTAssertTrue(result.handedOver, "handed over: the daemon writes into \(hf.path)")
        try assertXetFileIsAHubCacheBlob(repo, path, in: result.directory, hubCache: hf)
    }

    func testHFHubDisableXetReachesTheDaemonThroughTheRequestAndTakesTheBridge() throws {
        try makeRepo()
        try startDaemon(workers: 2, slots: 2)
        let result = try download(repo, extra: ["HF_HUB_DISABLE_XET": "1"])
        XCTAssertTrue(result.handedOver)
        try assertBridgedOnly(repo, path, size: 3 << 20, "the caller's setting is the request's")
        let request = try XCTUnwrap(names("requests").first)
        let record = try JSONDecoder().decode(SpoolRequest.self, from: Data(contentsOf: URL(fileURLWithPath: spoolPath("requests/\(request)"))))
        XCTAssertEqual(record.xetBridge, true)
    }

    func testACorruptStoredChunkFailsTheRequestAfterOneRefetchNamingTheFileWithNothingInPlace() throws {
        try makeRepo()
        hub.setFault(.corruptChunk(chunk: 7), for: key)
        let daemon = try startDaemon(workers: 2, slots: 2)
        XCTAssertThrowsError(try download(repo)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains(path), text)
            XCTAssertTrue(text.contains("fetched again"), text)
        }
        XCTAssertEqual(hub.reconstructions(for: key), 2, "fetched once, then once more from scratch; log:\n\(contents(daemon.log))")
        XCTAssertFalse(finalExists(repo, path), "nothing is put in place")
        let staged = (try? FileManager.default.contentsOfDirectory(atPath: ModelDirectory(modelDir(repo)).stagingDirectory.path)) ?? []
        XCTAssertFalse(staged.contains { $0.hasPrefix(path) && !$0.hasSuffix(".lock") }, "no staged bytes kept: \(staged)")
        let recorded = names("failures")
        XCTAssertEqual(recorded.count, 1, "the file's failure is recorded: \(recorded)")
        let marker = try XCTUnwrap(recorded.first)
        let failure = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: spoolPath("failures/\(marker)")))) as? [String: Any]
        XCTAssertEqual(failure?["kind"] as? String, FailureKind.checksumMismatch.rawValue)
        XCTAssertTrue((failure?["reason"] as? String)?.contains(path) == true, "\(failure ?? [:])")
        XCTAssertEqual(names("failed").count, 1, "the request failed")
    }

    func testRevisionTwoAfterRevisionOneDaemonHostedFetchesAtMostTwoPercentOfItsBytes() throws {
        let (first, second) = xetRevisions()
        try TestHub.writeRepo(root: root, repo: repo, files: [path: first])
        hub.setXet(repo)
        XCTAssertNotNil(hub.xetHash(of: key))
        try startDaemon(workers: 2, slots: 2)
        XCTAssertTrue(try download(repo).handedOver)
        try assertSameBytes(repo, path)
        try TestHub.writeRepo(root: root, repo: repo, files: [path: second])
        XCTAssertNotNil(hub.xetHash(of: key))
        hub.resetCounters()
        let result = try download(repo)
        XCTAssertTrue(result.handedOver)
        try assertSameBytes(repo, path)
        assertRevisionTwoFetchedOnlyItsNewChunks(key, second: second, label: "xet daemon update")
    }

    func testAModelFolderSwappedForALinkOutMidFileGetsNothingWrittenOutside() throws {
        // docs/protocol.md, "Writes follow no link": the claimant writes through the model
        // directory it opened by its judged path, so a swap mid-file keeps the writes inside.
        // Outside, the folders the model directory has (so a write that followed the link would land).
        let outside = temp.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside.appendingPathComponent("XetDaemon/.incomplete"), withIntermediateDirectories: true)
        try makeRepo(size: 3 << 20)
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: key)  // about 3 s for the file
        let extra = ["HF_DOWNLOAD_RANGE_CONCURRENCY": "1"]
        let daemon = try startDaemon(workers: 1, extra: extra)
        let (caller, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path], extra: extra)
        let sidecar = StagingFile.sidecarURL(path, in: ModelDirectory(modelDir(repo)))
        XCTAssertTrue(waitUntil(timeout: 20) { FileManager.default.fileExists(atPath: sidecar.path) },
                      "the Xet job is staging the file: \(contents(err))\n\(contents(daemon.log))")
        let org = cacheBase.appendingPathComponent("models/org")
        XCTAssertEqual(rename(org.path, org.path + ".real"), 0)
        XCTAssertEqual(symlink(outside.path, org.path), 0)
        XCTAssertTrue(waitForExit(caller, timeout: 30), "the caller ends")
        waitUntil(timeout: 20) { !self.names("done").isEmpty || !self.names("failed").isEmpty }
        let written = ((try? FileManager.default.subpathsOfDirectory(atPath: outside.path)) ?? []).sorted()
        XCTAssertEqual(written, ["XetDaemon", "XetDaemon/.incomplete"], "nothing written outside the base; daemon log:\n\(contents(daemon.log))")
    }

    func testAKilledWorkerMidFileIsResumedByTheNextClaimantWithoutFetchingRecordedTermsAgain() throws {
        // Many terms, recorded one by one.
        try writeManyTermXetRepo(repo, path)
        // One connection at 512 KiB/s: about 8 s for the file, so the kill lands mid-file.
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: key)
        let extra = ["HF_DOWNLOAD_RANGE_CONCURRENCY": "1"]
        let daemon = try startDaemon(workers: 1, extra: extra)
        let workers = Set(descendants(of: daemon.process.processIdentifier))
        let client = try speech(["download", repo, path, "--cache-base", cacheBase.path], extra: extra, hint: "download")
        guard let (victim, _) = firstClaim(by: workers) else {
            return XCTFail("no worker claimed the Xet job; daemon log:\n\(contents(daemon.log))")
        }
        let recorded = watchSidecar(repo, path) { record in (record.xet?.terms).flatMap { $0.count >= 5 ? $0 : nil } } ?? []
        XCTAssertEqual(kill(victim, SIGKILL), 0)
        let before = hub.xorbBytes(for: key)
        XCTAssertGreaterThanOrEqual(recorded.count, 5, "terms were recorded before the kill")
        XCTAssertFalse(finalExists(repo, path))
        hub.clearFaults()

        XCTAssertTrue(waitForExit(client.process, timeout: 30), "the download finished: \(contents(client.stderr))")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
        let resumed = hub.xorbBytes(for: key) - before
        XCTAssertTrue(contents(daemon.log).contains("revoked"), "the dead worker's claim was revoked:\n\(contents(daemon.log))")
        // The whole file's xorb bytes, from a fresh embedded download elsewhere.
        let whole = try xorbBytesOfAFreshDownload(repo, path)
        let recordedBytes = recorded.reduce(0) { $0 + $1.byteEnd - $1.byteStart + 1 }
        print("xet daemon resume: \(before) xorb bytes before the kill, \(resumed) after, \(whole) for the whole file; "
              + "\(recorded.count) terms of \(recordedBytes) bytes recorded")
        // The test Hub books each paced slice (a twentieth of the rate) before it sends it: the
        // slice sent into the killed worker's socket is booked after `before`, and is not fetched.
        let slice = (512 << 10) / 20
        XCTAssertLessThanOrEqual(resumed, whole - recordedBytes + slice + 8 * 1024,
                                 "the next claimant fetched \(resumed) of \(whole) xorb bytes; \(recorded.count) terms (\(recordedBytes) bytes) were recorded")
    }
}
