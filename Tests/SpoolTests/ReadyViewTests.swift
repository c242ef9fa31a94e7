// The machine's shared listing of `jobs/ready` (ReadyView): one process's listing serves the
// others until something may have arrived, and a listing begun before an arrival is never
// served after it (docs/protocol.md, "Change-driven wake-ups").
import Foundation
import Spool
import XCTest

final class ReadyViewTests: XCTestCase {
    private var base: URL!
    private var spool: Spool!
    private var view: ReadyView!
    private let jobs = ["0123456789abcdef01234567.000000", "0123456789abcdef01234567.000001"]

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("readyview-\(UUID().uuidString)")
        spool = try Spool(base: base, node: "t")
        guard let view = ReadyView(spool: spool) else { throw XCTSkip("no writable /dev/shm") }
        self.view = view
    }

    override func tearDownWithError() throws {
        view?.remove()
        if let spool, let live = LiveProgress(spool: spool) { rmdir(live.directory) }
        try? FileManager.default.removeItem(at: base)
    }

    func testAListingServesAnotherProcessUntilSomethingArrives() throws {
        let epoch = try XCTUnwrap(view.epoch())
        XCTAssertNil(view.names(at: epoch), "nothing was listed yet")
        view.store(jobs, at: epoch)
        // Another process of the machine opens its own view of the same spool.
        let other = try XCTUnwrap(ReadyView(spool: try Spool(base: base, node: "t")))
        XCTAssertEqual(other.epoch(), epoch)
        XCTAssertEqual(other.names(at: epoch), jobs)
        XCTAssertEqual(other.names(at: epoch &+ 1), nil, "a listing is served only at its own epoch")
        other.invalidate()
        let now = try XCTUnwrap(view.epoch())
        XCTAssertNotEqual(now, epoch)
        XCTAssertNil(view.names(at: now), "after an arrival the old listing is stale")
    }

    func testAListingBegunBeforeAnArrivalIsNeverServedAfterIt() throws {
        // A process reads the epoch and starts listing; a job arrives (the bump) before it stores
        // what it listed, which cannot hold the new job.
        let before = try XCTUnwrap(view.epoch())
        view.invalidate()
        view.store([jobs[0]], at: before)
        let after = try XCTUnwrap(view.epoch())
        XCTAssertNil(view.names(at: after), "the listing that missed the arrival is not served")
    }

    func testAClaimedJobLeavesTheSharedListingAndGarbageIsRefused() throws {
        let epoch = try XCTUnwrap(view.epoch())
        view.store(jobs, at: epoch)
        view.taken(jobs[0], at: epoch)
        XCTAssertEqual(view.names(at: epoch), [jobs[1]])
        // A record that names something other than jobs is not one to trust.
        view.store([jobs[1], "../../etc/passwd"], at: epoch)
        XCTAssertNil(view.names(at: epoch))
    }
}
