// Which claim an idle slot duplicates in the endgame, on real spool files; the rules alone are
// ClaimPolicyTests' tables.
import Foundation
import HubTypes
import Spool
@testable import TestSupport
import XCTest

/// Which claim an idle slot duplicates in the endgame (`Spool.laggingClaim`): only one whose
/// duplicate would be published first, by the bytes still to cross each node's link, or one that
/// has stopped growing. Real spool files, in-process.
final class EndgameChoiceTests: ScratchDirectoryTestCase {
    private let rangeSize: Int64 = 64 << 10

    private func planned(_ spool: Spool, ranges: Int) throws -> PlannedFile {
        let file = RepoFile(path: "model.safetensors", size: rangeSize * Int64(ranges), blobID: String(repeating: "a", count: 40),
                            sha256: String(repeating: "b", count: 64))
        let plan = PlannedFile(repo: "org/name", modelDir: scratch.appendingPathComponent("models/org/name").path,
                               commit: String(repeating: "c", count: 40), file: file, rangeSize: rangeSize, node: "node1")
        try spool.plan(plan, pending: [])
        return plan
    }

    /// Another node's claim of range `index`, with `left` of its bytes still to come (its temp part).
    private func claim(_ spool: Spool, _ plan: PlannedFile, _ index: Int, node: String, pid: Int, left: Double) throws {
        let job = plan.jobName(index)
        XCTAssertTrue(FileManager.default.createFile(atPath: spool.layout.path(.claimed, "\(job)@\(node)@\(pid)"), contents: nil))
        let written = Int(Double(rangeSize) * (1 - left))
        XCTAssertTrue(FileManager.default.createFile(atPath: spool.layout.path(.tmp, "part-\(job)@\(node)@\(pid)@1"),
                                                     contents: Data(count: written)))
    }

    /// Node1, holding three ranges with 0.35, 0.6 and 0.75 of their bytes to come, would race
    /// node2's range with 0.65 to come beside node2's three others, lose, and slow its own three
    /// ranges, which share its link with the duplicate. Node2's link has 2.25 ranges' worth to
    /// carry before that range is done; node1's would carry 2.7 (the duplicate's whole range and
    /// its own), so node1 does not race it.
    func testANodeWithRangesInFlightDoesNotRaceARangeItWouldNotWin() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let plan = try planned(spool, ranges: 8)
        for (i, left) in [0.6, 0.5, 0.5, 0.65].enumerated() { try claim(spool, plan, i, node: "node2", pid: 100 + i, left: left) }
        for (i, left) in [0.35, 0.6, 0.75].enumerated() { try claim(spool, plan, 4 + i, node: "node1", pid: 200 + i, left: left) }
        XCTAssertNil(spool.laggingClaim(), "a duplicate would end after node2's own part")
        XCTAssertFalse(ClaimPolicy.duplicateWouldWin(remaining: 65, length: 100, holder: [60, 50, 50, 65], mine: [35, 60, 75]))
    }

    /// A node with nothing in flight races the range with the most bytes to come.
    func testAnIdleNodeRacesTheRangeFarthestBehind() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let plan = try planned(spool, ranges: 8)
        for (i, left) in [0.6, 0.5, 0.5, 0.65].enumerated() { try claim(spool, plan, i, node: "node2", pid: 100 + i, left: left) }
        XCTAssertEqual(spool.laggingClaim()?.job, plan.jobName(3))
    }

    /// A claim that does not grow is raced by an idle node although by the bytes its holder would
    /// finish first: its holder's link is not moving.
    func testAStalledClaimIsRacedOnceItHasNotGrownForAWhile() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let plan = try planned(spool, ranges: 8)
        try claim(spool, plan, 0, node: "node2", pid: 100, left: 0.75)
        XCTAssertNil(spool.laggingClaim(stalledAfter: 0.3), "0.75 of a range on node2's link against a whole one on ours")
        usleep(400_000)
        XCTAssertEqual(spool.laggingClaim(stalledAfter: 0.3)?.job, plan.jobName(0), "no byte for 0.4 s: stalled")
    }

    /// Only a node holding more claims than this one is raced: a node holding as many as any other
    /// (a herd's even shares) learns all it needs from the claims' listing, and lists neither
    /// `tmp/` nor `endgame/` (nor looks at any claim's part).
    func testANodeHoldingAsManyClaimsAsAnyOtherLooksNoFurtherThanTheClaims() throws {
        let spool = try Spool(base: scratch, node: "node1", lease: 30)
        let plan = try planned(spool, ranges: 8)
        for (i, left) in [0.9, 0.9].enumerated() { try claim(spool, plan, i, node: "node2", pid: 100 + i, left: left) }
        for (i, left) in [0.1, 0.2].enumerated() { try claim(spool, plan, 2 + i, node: "node1", pid: 200 + i, left: left) }
        let temps = try FolderOpenCounter(spool.layout.path(.tmp))
        let raced = try FolderOpenCounter(spool.layout.path(.endgame))
        let look = spool.endgameLook()
        XCTAssertNil(look.lagging)
        XCTAssertTrue(look.othersHoldClaims)
        XCTAssertEqual(temps.take() + raced.take(), 0, "two claims against two: no look past the claims")
        // Node2 takes a third range: node1 now holds fewer, and looks at the parts.
        try claim(spool, plan, 4, node: "node2", pid: 104, left: 0.9)
        _ = spool.endgameLook()
        XCTAssertEqual(temps.take(), 1)
        XCTAssertEqual(raced.take(), 1)
    }
}
