// StallGuardClockTests - the stall guard keeps its time on the monotonic clock: in a process
// whose wall clock stands still (FrozenWallClock) a silent answer is still cut, as it must be
// when the clock is set back.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class StallGuardClockTests: DaemonTestCase {
    let repo = "org/Clocked"
    let path = "model.safetensors"

    func testTheStallGuardFiresWhenTheWallClockStandsStill() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 300_000])
        // The first answer sends nothing for a minute; the guard (1 s) cuts it and the retry gets the file.
        hub.setFault(.stall(afterBytes: 0, seconds: 60, times: 1), for: "\(repo)/\(path)")
        let client = try launch(speechBinary, ["download", repo, "--cache-base", cacheBase.path],
                                environment: environment(extra: ["LD_PRELOAD": try FrozenWallClock.build(in: temp.appendingPathComponent("clock"))]), hint: "download")
        XCTAssertTrue(waitForExit(client.process, timeout: 30), "the stalled answer was cut: \(contents(client.stderr))")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
    }
}
