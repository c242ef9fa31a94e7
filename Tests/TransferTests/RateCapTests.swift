// The read size the bandwidth cap asks libcurl for, and the node schedule's file on /dev/shm. The
// rate itself is measured end to end (SpeechCLITests.MaxRateTests), not here; its units are
// ByteUnitsTests'.
import Foundation
@testable import Transfer
import XCTest

final class RateCapTests: XCTestCase {
    func testReadSizeMakesLibcurlsHundredReadsASixteenthOfTheCapWithinLibcurlsBounds() {
        XCTAssertEqual(RateCap(bytesPerSecond: 2 << 20).readSize, (2 << 20) / 1600)
        XCTAssertEqual(RateCap(bytesPerSecond: 100 << 20).readSize, (100 << 20) / 1600)
        XCTAssertEqual(RateCap(bytesPerSecond: 1 << 30).readSize, 256 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 4 << 10).readSize, 1 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 1).bytesPerSecond, RateCap.minimum, "a cap below 1 KiB/s is raised to it")
    }

    /// A daemon killed with SIGKILL never removes its schedule (`speech-fetchd-rate-<uid>-<pid>`):
    /// the next daemon's removes it, and leaves the schedule of a daemon that still runs.
    func testMakingTheNodesScheduleRemovesTheSchedulesOfDaemonsThatAreGone() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("ratecap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let prefix = "speech-fetchd-rate-\(getuid())-"
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        gone.waitUntilExit()
        // Where makeSchedule puts it: /dev/shm, else the fallback.
        let probe = try RateCap.makeSchedule(name: prefix + "\(getpid())", fallback: scratch.path)
        let dir = (probe as NSString).deletingLastPathComponent
        let left = "\(dir)/\(prefix)\(gone.processIdentifier)"
        let running = "\(dir)/\(prefix)\(getppid())"  // the test runner's parent stands for a daemon that runs
        let other = "\(dir)/speech-fetchd-rate-\(getuid())-notapid"
        for path in [left, running, other] { XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(count: 8)), path) }
        defer { for path in [probe, left, running, other] { unlink(path) } }

        let path = try RateCap.makeSchedule(name: prefix + "\(getpid())", fallback: scratch.path)
        XCTAssertEqual(path, probe)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: left), "the schedule of a daemon that is gone is removed")
        XCTAssertTrue(FileManager.default.fileExists(atPath: running), "a running daemon's schedule stays")
        XCTAssertTrue(FileManager.default.fileExists(atPath: other), "a name that is not <prefix><pid> is not ours to judge")
    }
}
