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
