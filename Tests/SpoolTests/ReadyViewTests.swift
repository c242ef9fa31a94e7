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
        if let spool { LiveProgress(spool: spool)?.removeIfUnused() }
        try? FileManager.default.removeItem(at: base)
    }

    func testAListingServesAnotherProcessUntilSomethingArrives() throws {
        let epoch = try XCTUnwrap(view.epoch())
        XCTAssertNil(view.names(at: epoch), "nothing was listed yet")
        view.store(jobs, at: epoch)
        // Another process of the machine opens its own view of the same spool.
        let other = try XCTUnwrap(ReadyView(spool: try Spool(base: base, node: "t")))
        XCTAssertEqual(other.epoch(), epoch)
        XCTAssertEqual(other.names(at: epoch)?.names, jobs)
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
        XCTAssertEqual(view.names(at: epoch)?.names, [jobs[1]])
        // A record that names something other than jobs is not one to trust.
        view.store([jobs[1], "../../etc/passwd"], at: epoch)
        XCTAssertNil(view.names(at: epoch))
    }

    /// Every worker process of a node wakes on the same bump of the wake word: the bump makes
    /// the shared listing stale once for the machine, or each process's invalidation made the
    /// listing of the one before stale and every process listed (four listings per node and
    /// wake-up in the herd, docs/cluster.md).
    func testOneWakeWordBumpMakesTheListingStaleOnceForTheMachine() throws {
        let other = try XCTUnwrap(ReadyView(spool: try Spool(base: base, node: "t")))
        view.invalidate(forWord: 7)
        let epoch = try XCTUnwrap(view.epoch())
        view.store(jobs, at: epoch)
        other.invalidate(forWord: 7)  // the second process, woken by the same bump
        XCTAssertEqual(other.epoch(), epoch, "the same word seen again leaves the epoch as it is")
        XCTAssertEqual(other.names(at: epoch)?.names, jobs, "the first process's listing serves the second")
        other.invalidate(forWord: 8)
        XCTAssertNotEqual(view.epoch(), epoch, "a new bump makes it stale")
        XCTAssertNil(view.names(at: try XCTUnwrap(view.epoch())))
    }

    /// Of the processes that need a listing at one epoch, one lists; the others use its listing.
    func testOneProcessListsForTheOthersAtAnEpoch() throws {
        let epoch = try XCTUnwrap(view.epoch())
        let other = try XCTUnwrap(ReadyView(spool: try Spool(base: base, node: "t")))
        var listed = 0
        XCTAssertEqual(view.listing(at: epoch) { listed += 1; return jobs }?.names, jobs)
        XCTAssertEqual(other.listing(at: epoch) { listed += 1; return [] }?.names, jobs, "the second process uses the first's listing")
        XCTAssertEqual(listed, 1)
        other.invalidate()
        let now = try XCTUnwrap(other.epoch())
        XCTAssertEqual(other.listing(at: now) { listed += 1; return [jobs[1]] }?.names, [jobs[1]], "after an arrival it lists afresh")
        XCTAssertEqual(listed, 2)
        other.invalidate()
        let later = try XCTUnwrap(other.epoch())
        XCTAssertNil(view.listing(at: later) { listed += 1; return nil }, "a listing that failed")
        XCTAssertEqual(other.listing(at: later) { listed += 1; return [jobs[0]] }?.names, [jobs[0]], "is not shared as an empty folder")
        XCTAssertEqual(listed, 4)
    }

    /// A listing of many jobs keeps the first a scan tries (every file's first range before later
    /// ranges) and the count of all: a claim rewrites a record of at most `kept` names, however
    /// many small files were planned at once (issue 32, D7). Its kept jobs all taken while others
    /// were listed, it is stale: one process lists again.
    func testALongListingKeepsTheJobsAScanTriesFirstAndCountsTheRest() throws {
        let epoch = try XCTUnwrap(view.epoch())
        let later = (0..<10).map { String(format: "%024x.000001", $0) }
        let firsts = (0..<(ReadyView.kept + 100)).map { String(format: "%024x.000000", $0 + 1000) }
        view.store((later + firsts).sorted(), at: epoch)
        let listing = try XCTUnwrap(view.names(at: epoch))
        XCTAssertEqual(listing.count, later.count + firsts.count)
        XCTAssertEqual(listing.names, Array(firsts.sorted().prefix(ReadyView.kept)))
        for name in listing.names.dropLast() { view.taken(name, at: epoch) }
        XCTAssertEqual(view.names(at: epoch)?.names, [listing.names.last!])
        XCTAssertEqual(view.names(at: epoch)?.count, later.count + firsts.count - ReadyView.kept + 1)
        view.taken(listing.names.last!, at: epoch)
        XCTAssertNil(view.names(at: epoch), "its kept jobs taken, the rest are listed again")
    }
}
