// The pure rules of claiming (`ClaimPolicy`), as tables: each row is the figures a slot sees and
// the answer it must get. `mayClaim`: a node's share by count, and at the end of a file by the
// bytes its claims still have to come. `duplicateWouldWin`: an endgame duplicate is taken only
// when it would be published a quarter of a range before the claim it races.
import Spool
import XCTest

final class ClaimPolicyTests: XCTestCase {
    private struct ClaimRow {
        let why: String
        let node: String
        let ready: Int
        let loads: [String: [Double]]
        let liveNodes: Int
        let mayClaim: Bool
    }

    private let claimRows: [ClaimRow] = [
        ClaimRow(why: "a single node takes what its slots allow", node: "a", ready: 8,
                 loads: ["a": [1, 1, 1, 1, 1, 1]], liveNodes: 1, mayClaim: true),
        ClaimRow(why: "no live node counted is taken as one node", node: "a", ready: 0,
                 loads: [:], liveNodes: 0, mayClaim: true),
        ClaimRow(why: "a lone node's one claim is its whole share when nothing else is ready", node: "a", ready: 0,
                 loads: ["a": [1]], liveNodes: 1, mayClaim: false),
        ClaimRow(why: "the first claim of an idle spool", node: "a", ready: 1,
                 loads: [:], liveNodes: 2, mayClaim: true),
        ClaimRow(why: "two live nodes: a node may hold half of eight ranges", node: "a", ready: 5,
                 loads: ["a": [1, 1, 1]], liveNodes: 2, mayClaim: true),
        ClaimRow(why: "two live nodes: not a fifth of eight", node: "a", ready: 4,
                 loads: ["a": [1, 1, 1, 1]], liveNodes: 2, mayClaim: false),
        ClaimRow(why: "end of a file: node3 holds 2.3 ranges' worth, the others 0.3 and 0.6", node: "node3", ready: 2,
                 loads: ["node1": [0.1, 0.2], "node2": [0.3, 0.2, 0.1], "node3": [1, 1, 0.3]], liveNodes: 3, mayClaim: false),
        ClaimRow(why: "end of a file: node1, the least loaded, holds 0.3", node: "node1", ready: 2,
                 loads: ["node1": [0.1, 0.2], "node2": [0.3, 0.2, 0.1], "node3": [1, 1, 0.3]], liveNodes: 3, mayClaim: true),
        ClaimRow(why: "end of a file: node2 holds 0.6, within the even share less half a range", node: "node2", ready: 2,
                 loads: ["node1": [0.1, 0.2], "node2": [0.3, 0.2, 0.1], "node3": [1, 1, 0.3]], liveNodes: 3, mayClaim: true),
        ClaimRow(why: "the least loaded live node may always claim", node: "c", ready: 1,
                 loads: ["a": [1, 1, 1], "b": [1, 1, 1], "c": [1, 1, 0.9]], liveNodes: 3, mayClaim: true),
        ClaimRow(why: "a node above the least loaded and past the even share waits", node: "a", ready: 1,
                 loads: ["a": [1, 1, 1], "b": [1, 1, 1], "c": [1, 1, 0.9]], liveNodes: 3, mayClaim: false),
        ClaimRow(why: "a fourth live node: three claims are a node's whole share by count", node: "c", ready: 1,
                 loads: ["a": [1, 1, 1], "b": [1, 1, 1], "c": [1, 1, 0.9]], liveNodes: 4, mayClaim: false),
        ClaimRow(why: "a live node that holds nothing is the least loaded", node: "d", ready: 1,
                 loads: ["a": [1, 1, 1], "b": [1, 1, 1], "c": [1, 1, 0.9]], liveNodes: 4, mayClaim: true),
        ClaimRow(why: "a live node without claims makes the least load 0", node: "a", ready: 3,
                 loads: ["a": [0.2], "b": [0.2]], liveNodes: 3, mayClaim: true),
        ClaimRow(why: "a whole range more, within half a range of the even share", node: "a", ready: 2,
                 loads: ["a": [1], "b": [0.1]], liveNodes: 2, mayClaim: true),
        ClaimRow(why: "a whole range more, past half a range over the even share", node: "a", ready: 1,
                 loads: ["a": [1], "b": [0.1]], liveNodes: 2, mayClaim: false),
    ]

    func testMayClaimTable() {
        for row in claimRows {
            XCTAssertEqual(ClaimPolicy.mayClaim(node: row.node, ready: row.ready, loads: row.loads, liveNodes: row.liveNodes),
                           row.mayClaim, row.why)
        }
    }

    private struct RaceRow {
        let why: String
        let remaining: Int64
        let length: Int64
        let holder: [Int64]
        let mine: [Int64]
        let wins: Bool
    }

    private let raceRows: [RaceRow] = [
        RaceRow(why: "2.25 ranges on the holder's link against 2.7 on ours: it would lose",
                remaining: 65, length: 100, holder: [60, 50, 50, 65], mine: [35, 60, 75], wins: false),
        RaceRow(why: "an idle node against the same holder wins by a whole range",
                remaining: 65, length: 100, holder: [60, 50, 50, 65], mine: [], wins: true),
        RaceRow(why: "an untouched range, its holder's only one: a duplicate would only tie",
                remaining: 100, length: 100, holder: [100], mine: [], wins: false),
        RaceRow(why: "a holder sharing its link with two more ranges",
                remaining: 60, length: 100, holder: [60, 100, 100], mine: [], wins: true),
        RaceRow(why: "winning by exactly a quarter of a range is enough",
                remaining: 100, length: 100, holder: [100, 25], mine: [], wins: true),
        RaceRow(why: "a byte short of a quarter is not",
                remaining: 100, length: 100, holder: [100, 24], mine: [], wins: false),
        RaceRow(why: "each of our ranges counts at most a whole range beside the duplicate",
                remaining: 100, length: 100, holder: [100, 100, 100, 100], mine: [500], wins: true),
        RaceRow(why: "each of the holder's ranges counts at most the raced range's rest",
                remaining: 50, length: 100, holder: [50, 1000], mine: [], wins: false),
    ]

    func testDuplicateWouldWinTable() {
        for row in raceRows {
            XCTAssertEqual(ClaimPolicy.duplicateWouldWin(remaining: row.remaining, length: row.length, holder: row.holder,
                                                         mine: row.mine), row.wins, row.why)
        }
    }
}
