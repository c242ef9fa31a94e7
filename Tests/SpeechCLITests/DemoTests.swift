// `speech demo`, the README's first command: the test Hub runs as the speech-testhub beside
// speech (speech does not link it), serves the sharded demo repo, and is gone when the demo ends.
import Foundation
@testable import TestSupport
import XCTest

final class DemoTests: DaemonTestCase {
    func testDemoDownloadsTheShardedRepoFromTheTestHubBesideSpeechAndStopsIt() throws {
        let base = temp.appendingPathComponent("demo-cache")
        let demo = try speech(["demo", "--size", "4M", "--cache-base", base.path], hint: "demo")
        XCTAssertTrue(waitForExit(demo.process, timeout: 60), "the demo finishes")
        XCTAssertEqual(demo.process.terminationStatus, 0, contents(demo.stderr))
        XCTAssertTrue(contents(demo.stdout).contains("test Hub at http://127.0.0.1:"), contents(demo.stdout))
        let model = base.appendingPathComponent("models/demo/Speech-Demo-Model")
        for i in 1...4 {
            let shard = model.appendingPathComponent("model-0000\(i)-of-00004.safetensors")
            XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: shard.path)[.size] as? Int, 1 << 20, shard.path)
        }
        for path in ["model.safetensors.index.json", "config.json", "tokenizer/vocab.json"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: model.appendingPathComponent(path).path), path)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: model.appendingPathComponent("model.safetensors").path),
                       "the consolidated copy the index does not name is not fetched")
        let scratch = "speech-demo-\(demo.process.processIdentifier)"
        XCTAssertEqual(processes(mentioning: scratch), [], "no test Hub is left running")
        XCTAssertFalse(FileManager.default.fileExists(atPath: URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(scratch).path),
                       "the demo's scratch folder (Hub root, log) is removed: the cache is elsewhere")
    }

    func testDemoWithoutACacheBaseLeavesNothingInTmpAndSaysSo() throws {
        let demo = try speech(["demo", "--size", "1M"], hint: "demo")
        XCTAssertTrue(waitForExit(demo.process, timeout: 60), "the demo finishes")
        XCTAssertEqual(demo.process.terminationStatus, 0, contents(demo.stderr))
        let scratch = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("speech-demo-\(demo.process.processIdentifier)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.path), "the demo's Hub and cache are removed: \(scratch.path)")
        XCTAssertTrue(contents(demo.stderr).contains("removed \(scratch.path)"), contents(demo.stderr))
    }

    func testDemoWithoutSpeechTestHubBesideItSaysWhatToBuild() throws {
        let alone = temp.appendingPathComponent("alone", isDirectory: true)
        try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
        let copy = alone.appendingPathComponent("speech")
        try FileManager.default.copyItem(at: speechBinary, to: copy)
        let demo = try launch(copy, ["demo", "--size", "1M", "--cache-base", temp.appendingPathComponent("c").path],
                              environment: environment(), hint: "demo-alone")
        XCTAssertTrue(waitForExit(demo.process, timeout: 30))
        XCTAssertEqual(demo.process.terminationStatus, 1)
        let said = contents(demo.stderr)
        XCTAssertTrue(said.contains("no speech-testhub beside speech"), said)
        XCTAssertTrue(said.contains("--product speech-testhub"), "it says how to build it: \(said)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: temp.appendingPathComponent("c/models").path), "nothing downloaded")
    }
}
