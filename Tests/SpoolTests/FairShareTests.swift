// Whether a node's slot may claim one more ready range (`Spool.mayClaim`, issue 13): within its
// share by count, and, at the end of a file, by the bytes its claims still have to come.
import Spool
import XCTest

final class FairShareTests: XCTestCase {
    func testASingleNodeTakesWhatItsSlotsAllow() {
        XCTAssertTrue(Spool.mayClaim(node: "a", ready: 8, loads: ["a": [1, 1, 1, 1, 1, 1]], liveNodes: 1))
    }

    func testTwoLiveNodesSplitTheRangesByCount() {
        // The other node is alive but has claimed nothing yet: node a holds half of the eight ranges.
        XCTAssertTrue(Spool.mayClaim(node: "a", ready: 5, loads: ["a": [1, 1, 1]], liveNodes: 2))
        XCTAssertFalse(Spool.mayClaim(node: "a", ready: 4, loads: ["a": [1, 1, 1, 1]], liveNodes: 2))
    }

    /// cluster-test D at 4fd2026: with four ranges left, node3's slots freed one after another and
    /// it took all four (fresh, sharing its link) while node1's and node2's ranges were nearly
    /// done; it finished 1.3 s after them. By count each take was within its share; by the bytes
    /// still to come, a node that has just taken two fresh ranges leaves the last ones to the
    /// nodes that are about to be idle.
    func testAtTheEndOfAFileANodeWithFreshRangesLeavesTheLastOnesToTheOthers() {
        let loads: [String: [Double]] = ["node1": [0.1, 0.2], "node2": [0.3, 0.2, 0.1], "node3": [1, 1, 0.3]]
        XCTAssertFalse(Spool.mayClaim(node: "node3", ready: 2, loads: loads, liveNodes: 3), "node3 holds 2.3 ranges' worth")
        XCTAssertTrue(Spool.mayClaim(node: "node1", ready: 2, loads: loads, liveNodes: 3), "node1 holds 0.3")
        XCTAssertTrue(Spool.mayClaim(node: "node2", ready: 2, loads: loads, liveNodes: 3), "node2 holds 0.6")
    }

    /// The least loaded live node may always claim, so a ready range never waits for the loads to
    /// even out.
    func testTheLeastLoadedNodeMayAlwaysClaim() {
        let loads: [String: [Double]] = ["a": [1, 1, 1], "b": [1, 1, 1], "c": [1, 1, 0.9]]
        XCTAssertTrue(Spool.mayClaim(node: "c", ready: 1, loads: loads, liveNodes: 3))
        XCTAssertFalse(Spool.mayClaim(node: "a", ready: 1, loads: loads, liveNodes: 3))
        // A live node that holds nothing is the least loaded.
        XCTAssertFalse(Spool.mayClaim(node: "c", ready: 1, loads: loads, liveNodes: 4))
        XCTAssertTrue(Spool.mayClaim(node: "d", ready: 1, loads: loads, liveNodes: 4))
    }
}
