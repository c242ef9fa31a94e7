// kill -9 of a real `speech download` process mid-transfer, then a resume that refetches at
// most the ranges that were in flight.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class CrashResumeTests: HubTestCase {
    let repo = "org/Big"
    let size = 8 << 20
    let rangeSize = 256 << 10
    let concurrency = 4

    func testKillNineMidDownloadThenResumeRefetchesOnlyInFlightRanges() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let file = "\(repo)/model.safetensors"
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: file)  // 4 MiB/s in all: ~2 s for the file

        let child = Process()
        child.executableURL = speechBinary
        child.arguments = ["download", repo, "--cache-base", cacheBase.path]
        child.environment = environment()
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try child.run()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL); child.waitUntilExit() } }

        // Wait until the sidecar records a third of the ranges, then kill without warning.
        let sidecar = ModelDirectory(modelDir(repo)).stagingDirectory
            .appendingPathComponent("model.safetensors.sidecar.json")
        let deadline = Date().addingTimeInterval(20)
        var recorded = 0
        while Date() < deadline {
            if let data = FileManager.default.contents(atPath: sidecar.path),
               let record = try? JSONDecoder().decode(Sidecar.self, from: data) {
                recorded = record.done.count
                if recorded >= 10 { break }
            }
            usleep(20_000)
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationReason, .uncaughtSignal)
        XCTAssertGreaterThanOrEqual(recorded, 10, "the child made progress before it was killed")
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("model.safetensors").path))

        let servedBeforeKill = hub.bodyBytes(for: file)
        hub.clearFaults()
        let result = try download(repo)
        XCTAssertEqual(result.fetched, ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
        let total = hub.bodyBytes(for: file)
        let refetched = total - size
        XCTAssertLessThanOrEqual(refetched, concurrency * rangeSize,
                                 "served \(total) bytes in all (\(servedBeforeKill) before the kill): at most the in-flight ranges twice")
        let resumeBytes = total - servedBeforeKill
        XCTAssertLessThanOrEqual(resumeBytes, size - recorded * rangeSize, "recorded ranges were not fetched again")
    }

    /// Zero refetch after SIGKILL (issue 14): a caller killed in the middle of its ranges leaves
    /// their durable bytes in the sidecar (`partial`), and the next call asks only for the rest.
    func testKillNineMidRangeThenResumeAsksOnlyForTheMissingTails() throws {
        let size = 4 << 20
        let bigRange = 1 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let file = "\(repo)/model.safetensors"
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: file)  // 4 s per range: none finishes
        let extra = ["HF_DOWNLOAD_RANGE_CHUNK": "\(bigRange)"]

        let child = Process()
        child.executableURL = speechBinary
        child.arguments = ["download", repo, "--cache-base", cacheBase.path]
        child.environment = environment(extra: extra)
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try child.run()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL); child.waitUntilExit() } }

        // Kill once half the file has been served, each range a part of the way.
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline && hub.bodyBytes(for: file) < size / 2 { usleep(20_000) }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        XCTAssertEqual(child.terminationReason, .uncaughtSignal)
        let servedBeforeKill = hub.bodyBytes(for: file)
        XCTAssertGreaterThanOrEqual(servedBeforeKill, size / 2, "the child made progress before it was killed")
        let sidecarURL = ModelDirectory(modelDir(repo)).stagingDirectory.appendingPathComponent("model.safetensors.sidecar.json")
        let record = FileManager.default.contents(atPath: sidecarURL.path).flatMap { try? JSONDecoder().decode(Sidecar.self, from: $0) }
        XCTAssertEqual(record?.done ?? [], [], "no range finished at 256 KiB/s")
        let partial = Dictionary(uniqueKeysWithValues: (record?.partial ?? []).map { (String($0.index), $0.bytes) })

        hub.clearFaults()
        hub.resetCounters()
        let result = try download(repo, extra: extra)
        XCTAssertEqual(result.fetched, ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
        let resumed = hub.bodyBytes(for: file)
        print("served \(servedBeforeKill) bytes before the kill, recorded \(partial), \(resumed) after")
        // Every range resumes at its recorded byte: no body starts inside a recorded prefix.
        for index in 0..<(size / bigRange) {
            let start = index * bigRange
            let kept = Int(partial[String(index)] ?? 0)
            XCTAssertGreaterThan(kept, 0, "range \(index)'s first bytes were recorded: \(partial)")
            for body in hub.servedRanges(for: file) where body.overlaps(start ..< start + bigRange) {
                XCTAssertGreaterThanOrEqual(body.lowerBound, start + kept, "range \(index) resumed after its \(kept) recorded bytes")
            }
        }
        XCTAssertEqual(resumed, size - Int(partial.values.reduce(0, +)), "only the missing tails were served")
        XCTAssertLessThan(resumed, size - size / 4, "most of the \(servedBeforeKill) bytes that arrived before the kill were kept")
    }
}
