// kill -9 of a real `speech download` process mid-transfer, then a resume that refetches at
// most the ranges that were in flight.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
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
}
