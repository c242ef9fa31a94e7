// The engine under injected faults: every failure either heals by retry or fails clearly,
// and nothing corrupt ever lands in the cache.
import Digest
import Foundation
import HubClient
import ModelCache
import SpeechFetch
import TestHub
import XCTest

final class FaultTests: HubTestCase {
    let repo = "org/Faulty"
    let size = (2 << 20) + 4321  // 9 ranges of 256 KiB
    var file: String { "\(repo)/model.safetensors" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size, "small.bin": 100_000])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{\"k\": true}".utf8)])
    }

    var finalFile: URL { modelDir(repo).appendingPathComponent("model.safetensors") }

    func testDroppedConnectionResumesMidRange() throws {
        hub.setFault(.dropConnection(afterBytes: 100_000, times: 3), for: file)
        try download(repo, include: ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
        XCTAssertEqual(hub.bodyBytes(for: file), size, "a resumed range asks only for the bytes it lacks")
        XCTAssertEqual(overlap(hub.servedRanges(for: file)), 0)
    }

    func testStallGuardAbandonsTheAttemptAndRetries() throws {
        hub.setFault(.stall(afterBytes: 50_000, seconds: 4, times: 1), for: file)
        let started = Date()
        try download(repo, include: ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
        XCTAssertGreaterThan(hub.requests(for: file), 9, "the stalled range was requested again")
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "the guard (1 s here) fired before the stall ended")
    }

    func testFlippedByteDeletesTheFileAndNamesTheDigests() throws {
        hub.setFault(.flipByte(offset: 777_777), for: file)
        XCTAssertThrowsError(try download(repo, include: ["model.safetensors"])) { error in
            guard case CacheError.checksumMismatch(let path, let expected, let actual) = error else {
                return XCTFail("expected a checksum mismatch, got \(error)")
            }
            XCTAssertEqual(path, "model.safetensors")
            XCTAssertNotEqual(expected, actual)
            XCTAssertTrue("\(error)".contains(expected) && "\(error)".contains(actual))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: finalFile.path), "a corrupt file is never cached")
        let staging = modelDir(repo).appendingPathComponent(".incomplete")
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: staging.path)) ?? [], [],
                       "the corrupt staging file and its sidecar are deleted")
        // With the fault gone, the next call fetches a good copy.
        hub.clearFaults()
        try download(repo, include: ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
    }

    func testServerErrorsAreRetriedUntilSuccess() throws {
        hub.setFault(.status(code: 503, times: 2, retryAfter: nil), for: file)
        hub.setFault(.status(code: 500, times: 1, retryAfter: nil), for: "\(repo)/config.json")
        try download(repo)
        try assertSameBytes(repo, "model.safetensors")
        try assertSameBytes(repo, "config.json")
    }

    func testTooManyRequestsHonoursRetryAfter() throws {
        hub.setFault(.status(code: 429, times: 1, retryAfter: 1), for: "\(repo)/config.json")
        let started = Date()
        try download(repo, include: ["config.json"])
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.9, "Retry-After: 1 beats the 50 ms ladder")
        try assertSameBytes(repo, "config.json")
    }

    func testRetriesGiveUpAfterTheLastAttempt() throws {
        hub.setFault(.status(code: 500, times: 100, retryAfter: nil), for: "\(repo)/config.json")
        XCTAssertThrowsError(try download(repo, include: ["config.json"], extra: ["SPEECH_FETCH_RETRY_ATTEMPTS": "3"])) { error in
            guard case HubError.http(let status, _, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(status, 500)
        }
        XCTAssertEqual(hub.requests(for: "\(repo)/config.json"), 3)
    }

    func testRangeIgnoredIsNeverWrittenAtAnOffset() throws {
        hub.setFault(.ignoreRange, for: file)
        try download(repo, include: ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
    }

    func testExpiredCDNLocationIsResolvedAgain() throws {
        hub.setFault(.cdnExpired(times: 2), for: file)
        try download(repo, include: ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
        let heads = hub.requestLog().filter { $0.contains("HEAD") && $0.contains("/resolve/") }
        XCTAssertGreaterThanOrEqual(heads.count, 2, "a fresh location was asked for: \(heads)")
    }

    func testMissingRepoFailsAtOnceWithoutRetries() throws {
        let started = Date()
        XCTAssertThrowsError(try download("org/DoesNotExist", extra: ["SPEECH_FETCH_RETRY_DELAYS": "5"])) { error in
            guard case HubError.repoNotFound = error else { return XCTFail("\(error)") }
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "no retry ladder for a 404/401 answer")
        XCTAssertEqual(hub.requestLog().count, 1)
    }

    func testGatedRepoSaysToAcceptTheTermsAndSetTheToken() throws {
        hub.setGated(repo, token: "hf_sesame")
        XCTAssertThrowsError(try download(repo, extra: ["SPEECH_FETCH_RETRY_DELAYS": "5"])) { error in
            guard case HubError.gatedRepo = error else { return XCTFail("\(error)") }
            XCTAssertTrue("\(error)".contains("HF_TOKEN"))
        }
        XCTAssertEqual(hub.requestLog().count, 1)
        try download(repo, extra: ["HF_TOKEN": "hf_sesame"])
        try assertSameBytes(repo, "model.safetensors")
        XCTAssertFalse(hub.sawAuthorization(onCDN: true), "the token never goes to the CDN")
    }

    func testMissingFileOnResolveIsEntryNotFound() throws {
        // The tree lists a file the resolve endpoint no longer has: a 404 is final.
        let snapshotFile = root.appendingPathComponent("\(repo)/config.json")
        hub.setFault(.status(code: 404, times: 100, retryAfter: nil), for: "\(repo)/config.json")
        XCTAssertThrowsError(try download(repo, include: ["config.json"])) { error in
            guard let hubError = error as? HubError else { return XCTFail("\(error)") }
            XCTAssertFalse(hubError.isRetryable)
        }
        XCTAssertEqual(hub.requests(for: "\(repo)/config.json"), 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: snapshotFile.path))
    }
}

final class HostileServerTests: HubTestCase {
    func testPathTraversalEntryIsRefusedAndNothingIsWrittenOutside() throws {
        let repo = "org/Hostile"
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{}".utf8)])
        hub.forgeTreeEntry(repo, path: "../../escaped.txt")
        XCTAssertThrowsError(try download(repo)) { error in
            guard case HubError.unsafePath(let path, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, "../../escaped.txt")
            XCTAssertTrue("\(error)".contains("../../escaped.txt"))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheBase.appendingPathComponent("models/escaped.txt").path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheBase.appendingPathComponent("escaped.txt").path))
        let log = hub.requestLog()
        XCTAssertFalse(log.contains { $0.contains("/resolve/") }, "no file was fetched: \(log)")
    }

    func testAbsoluteAndEmptyComponentEntriesAreRefused() throws {
        for (i, forged) in ["/etc/passwd-copy", "a//b", ".incomplete/x"].enumerated() {
            let hubRepo = "org/Hostile\(i)"
            try TestHub.writeRepo(root: root, repo: hubRepo, files: ["ok.json": Data("{}".utf8)])
            hub.forgeTreeEntry(hubRepo, path: forged)
            XCTAssertThrowsError(try download(hubRepo), forged) { error in
                guard case HubError.unsafePath = error else { return XCTFail("\(forged): \(error)") }
            }
        }
    }
}
