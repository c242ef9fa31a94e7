// kill -9 of a real `speech download` process mid-transfer, then a resume that refetches at
// most the ranges that were in flight.
import Foundation
import HubTypes
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

    /// Starts `speech download` of the repo in a child process, for the test to kill.
    private func startDownload(extra: [String: String] = [:]) throws -> Process {
        let child = Process()
        child.executableURL = speechBinary
        child.arguments = ["download", repo, "--cache-base", cacheBase.path]
        child.environment = environment(extra: extra)
        child.standardOutput = FileHandle.nullDevice
        child.standardError = FileHandle.nullDevice
        try child.run()
        return child
    }

    func testKillNineMidDownloadThenResumeRefetchesOnlyInFlightRanges() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let file = "\(repo)/model.safetensors"
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: file)  // 4 MiB/s in all: ~2 s for the file

        let child = try startDownload()
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

    /// A range finished just before a kill -9, while the sync that would record it as done was
    /// still running, is not fetched again: it was recorded first as a head as long as its range,
    /// for this boot (`persist`), and a successor in the same boot takes it as done; a successor
    /// in another boot (after a power loss) does not.
    func testARangeFinishedBeforeItsSyncCountsAsDoneInTheSameBootOnly() throws {
        let rangeSize: Int64 = 256 << 10
        let file = RepoFile(path: "model.safetensors", size: 4 * rangeSize, blobID: String(repeating: "a", count: 40),
                            sha256: String(repeating: "b", count: 64))
        let directory = ModelDirectory(modelDir(repo))
        let commit = String(repeating: "c", count: 40)
        _ = try StagingFile(file: file, in: directory, commit: commit, rangeSize: rangeSize)  // its first sidecar
        let sidecarURL = StagingFile.sidecarURL(file.path, in: directory)
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        func reopen(recordedIn bootID: String) throws -> StagingFile {
            var record = try JSONDecoder().decode(Sidecar.self, from: Data(contentsOf: sidecarURL))
            // What a process killed during its sync leaves: range 0 synced, 1 and 2 finished
            // since, 3 half way.
            record.done = [0]
            record.partial = [PartialRange(index: 1, bytes: rangeSize), PartialRange(index: 2, bytes: rangeSize),
                              PartialRange(index: 3, bytes: rangeSize / 2)]
            record.partialBoot = bootID
            try JSONEncoder().encode(record).write(to: sidecarURL)
            return try StagingFile(file: file, in: directory, commit: commit, rangeSize: rangeSize)
        }
        let sameBoot = try reopen(recordedIn: boot)
        XCTAssertEqual(sameBoot.doneRanges, [0, 1, 2], "finished ranges count in the boot that wrote them")
        XCTAssertEqual(sameBoot.partialBytes(3), rangeSize / 2)
        try sameBoot.persist(unsyncedHeads: true)  // not durable yet: this write syncs first
        let written = try JSONDecoder().decode(Sidecar.self, from: Data(contentsOf: sidecarURL))
        XCTAssertEqual(written.done, [0, 1, 2])
        XCTAssertNil(written.partialBoot, "recorded as done only after a sync")
        let otherBoot = try reopen(recordedIn: "another-boot")
        XCTAssertEqual(otherBoot.doneRanges, [0], "after a reboot only synced ranges count")
        XCTAssertEqual(otherBoot.partialBytes(3), 0)
    }

    /// Issue 14: a repair after a checksum mismatch is in the sidecar, so a caller killed while
    /// it fetches ranges again is followed by one that goes on with the repair: the ranges
    /// found equal before the kill are not fetched a third time, and the file verifies.
    func testKillNineDuringARepairThenTheNextCallGoesOnWithTheRepair() throws {
        let size = 2 << 20  // 8 ranges of 256 KiB
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let file = "\(repo)/model.safetensors"
        let bad = 7 * rangeSize + 12_345  // in the last range: the repair goes through all the others first
        hub.setFault(.flipByte(offset: bad, times: 1), for: file)
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: file)  // 0.25 s per range

        let child = try startDownload()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL); child.waitUntilExit() } }

        // Kill once the sidecar shows a repair that found two ranges equal.
        let sidecarURL = ModelDirectory(modelDir(repo)).stagingDirectory.appendingPathComponent("model.safetensors.sidecar.json")
        var repair: RepairRecord?
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline && child.isRunning {
            if let data = FileManager.default.contents(atPath: sidecarURL.path),
               let record = try? JSONDecoder().decode(Sidecar.self, from: data), let r = record.repair, r.confirmed.count >= 2 {
                repair = r
                break
            }
            usleep(10_000)
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        guard let repair else { return XCTFail("no repair was recorded before the child ended (\(child.terminationReason))") }
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("model.safetensors").path))

        hub.clearFaults()
        hub.resetCounters()
        let result = try download(repo)
        XCTAssertEqual(result.fetched, ["model.safetensors"])
        try assertSameBytes(repo, "model.safetensors")
        let served = hub.servedRanges(for: file)
        print("repair at the kill: \(repair); served after it: \(served)")
        for index in repair.confirmed {
            let r = index * rangeSize ..< (index + 1) * rangeSize
            XCTAssertFalse(served.contains { $0.overlaps(r) }, "range \(index), found equal before the kill, was not fetched again")
        }
        XCTAssertTrue(served.contains { $0.contains(bad) }, "the bad range was fetched again")
        XCTAssertLessThanOrEqual(hub.bodyBytes(for: file), size - repair.confirmed.count * rangeSize,
                                 "the repair went on (the file was not fetched again)")
    }

    /// Zero refetch after SIGKILL: a caller killed in the middle of its ranges leaves
    /// their durable bytes in the sidecar (`partial`), and the next call asks only for the rest.
    func testKillNineMidRangeThenResumeAsksOnlyForTheMissingTails() throws {
        let size = 4 << 20
        let bigRange = 1 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": size])
        let file = "\(repo)/model.safetensors"
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: file)  // 4 s per range: none finishes
        let extra = ["HF_DOWNLOAD_RANGE_CHUNK": "\(bigRange)"]

        let child = try startDownload(extra: extra)
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
