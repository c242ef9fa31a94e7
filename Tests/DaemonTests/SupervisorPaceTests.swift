// SupervisorPaceTests - when a supervisor revokes: when a worker of its node died, on the safety
// pass and every quarter lease while busy, not on every move of the generation (in a herd every
// node's pass on every other node's change listed the claims).
@testable import Daemon
import Foundation
import XCTest

final class SupervisorPaceTests: XCTestCase {
    func testAGenerationMoveAloneRevokesNothingBeforeTheQuarterLease() {
        var pace = SupervisorPace(lease: 30)
        let start = Date()
        XCTAssertTrue(pace.due(now: start, changed: true).revoke, "the first pass revokes")
        let moved = pace.due(now: start.addingTimeInterval(1), changed: true)
        XCTAssertTrue(moved.full, "a generation move is a full pass")
        XCTAssertFalse(moved.revoke, "another node's change expires no claim: no listing of the claims")
        XCTAssertFalse(pace.due(now: start.addingTimeInterval(3), changed: true).revoke)
        XCTAssertTrue(pace.due(now: start.addingTimeInterval(8), changed: false).revoke, "the quarter lease (7.5 s) revokes")
    }

    func testAWorkerThatDiedIsRevokedAtOnce() {
        var pace = SupervisorPace(lease: 30)
        let start = Date()
        _ = pace.due(now: start, changed: true)
        XCTAssertTrue(pace.due(now: start.addingTimeInterval(1), changed: true, workersChanged: true).revoke,
                      "a dead worker's claims go back to ready at once")
    }
}

/// How often a waiter whose node's supervisor wakes it looks at the shared filesystem unwoken.
final class SharedLooksTests: XCTestCase {
    func testAWaiterWithoutProgressLooksEveryThreeSecondsAtFirstAndOneWithProgressEverySecond() {
        let start = Date()
        func looks(_ shared: SharedLooks, over seconds: Double) -> Int {
            var shared = shared
            var count = 0
            for tenth in 0...Int(seconds * 10) where shared.due(now: start.addingTimeInterval(Double(tenth) / 10 + 0.05)) {
                shared.looked(now: start.addingTimeInterval(Double(tenth) / 10 + 0.05))
                count += 1
            }
            return count
        }
        XCTAssertEqual(looks(SharedLooks(least: SharedLooks.leastWithoutProgress), over: 10), 4, "0, 3, 6, 9.1 s")
        XCTAssertEqual(looks(SharedLooks(), over: 10), 6, "0, 1, 2, 3, 4.6, 7 s: every second while a third of the wait is shorter")
    }
}
