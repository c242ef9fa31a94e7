// A staging lock left by a process that died (on this node) guards nothing: a later successful
// download removes it, and the staging folder with it when nothing else is there. A live
// holder's lock, another node's lock and a dead holder's staged bytes (a resume point) stay.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class DeadLockSweepTests: HubTestCase {
    let repo = "org/Swept"
    let node = "sweepnode"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try TestHub.generateRepo(root: root, repo: repo, files: ["config.json": 300, "model.safetensors": 100_000])
    }

    func plantLock(_ repoPath: String, holder: String) throws {
        let staging = modelDir(repo).appendingPathComponent(ModelLayout.staging)
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        try Data(holder.utf8).write(to: staging.appendingPathComponent(ModelLayout.lockName(repoPath)))
    }

    func testASuccessfulDownloadRemovesADeadHoldersLockAndTheEmptyStagingFolder() throws {
        let extra = ["SPEECH_FETCH_NODE": node]
        try download(repo, extra: extra)
        let staging = modelDir(repo).appendingPathComponent(ModelLayout.staging).path
        // Everything current: the call is served from the cache, and still sweeps.
        try plantLock("config.json", holder: "\(node)@\(try deadPid())")
        try download(repo, extra: extra)
        XCTAssertFalse(FileManager.default.fileExists(atPath: staging), "\((try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? [])")
        // A file to fetch: the transfer's own path sweeps too.
        try FileManager.default.removeItem(at: modelDir(repo).appendingPathComponent("model.safetensors"))
        try plantLock("config.json", holder: "\(node)@\(try deadPid())")
        let result = try download(repo, extra: extra)
        XCTAssertEqual(result.fetched, ["model.safetensors"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: staging), "\((try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? [])")
    }

    func testALiveHoldersAnotherNodesAndAResumePointsLockStay() throws {
        let extra = ["SPEECH_FETCH_NODE": node]
        try download(repo, extra: extra)
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        defer { kill(sleeper.processIdentifier, SIGKILL); sleeper.waitUntilExit() }
        try plantLock("config.json", holder: "\(node)@\(sleeper.processIdentifier)")
        try plantLock("model.safetensors", holder: "othernode@\(try deadPid())")
        try plantLock("weights/big.bin", holder: "\(node)@\(try deadPid())")
        let staging = modelDir(repo).appendingPathComponent(ModelLayout.staging)
        try Data(count: 4096).write(to: staging.appendingPathComponent(ModelLayout.stagingName("weights/big.bin")))
        try download(repo, extra: extra)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: staging.path)), [ModelLayout.lockName("config.json"), ModelLayout.lockName("model.safetensors"),
                                                          ModelLayout.lockName("weights/big.bin"), ModelLayout.stagingName("weights/big.bin")])
    }
}
