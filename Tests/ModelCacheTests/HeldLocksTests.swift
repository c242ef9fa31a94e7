// The staging locks a run holds are refreshed every lease/4 by the process's one timer
// (`LockRefresher`), whatever the runs holding locks at once: a planner or splicer holding a small
// file's lock for a moment no longer makes a timer of its own (issue 32, D7).
import Foundation
@testable import ModelCache
import SharedFiles
import XCTest

final class HeldLocksTests: XCTestCase {
    private var base: URL!
    /// Lease 0.4 s: the refresher ticks every 0.1 s.
    private let lease = 0.4

    override func setUpWithError() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("heldlocks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: base)
    }

    private func take(_ name: String, in directory: ModelDirectory) throws -> StagingLock {
        try XCTUnwrap(try StagingLock.take(name, in: directory, owner: LockOwner(node: "t"), lease: lease))
    }

    /// Sets a lock's mtime an hour back, as a holder that stopped refreshing would leave it.
    private func age(_ lock: StagingLock) {
        var times = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), timespec(tv_sec: time(nil) - 3600, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, lock.path, &times, AT_SYMLINK_NOFOLLOW), 0)
    }

    private func age(of lock: StagingLock) -> Double {
        guard let mtime = SharedFS.mtime(lock.path).value else { return .infinity }
        return Date().timeIntervalSince1970 - mtime
    }

    /// Waits (up to 10 s: a bound, not a measure) until `condition` holds.
    private func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    func testTheLocksOfSeveralRunsAreAllRefreshedAndTheTimerStopsWithTheLastRun() throws {
        let directory = ModelDirectory(base.appendingPathComponent("model"))
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let first = HeldLocks(lease: lease)
        let second = HeldLocks(lease: lease)
        let a = try take("a.json", in: directory)
        let b = try take("b.json", in: directory)
        let c = try take("c.json", in: directory)
        first.add(a)
        second.add(b)
        second.add(c)
        for lock in [a, b, c] { age(lock) }
        XCTAssertTrue(eventually { [a, b, c].allSatisfy { age(of: $0) < 60 } }, "every held lock is refreshed, whichever run holds it")
        XCTAssertTrue(LockRefresher.every(LeaseJudge.refreshInterval(lease: lease, atLeast: 0.05)).isTicking)

        // One run ends: the other's locks are still refreshed.
        first.releaseAll()
        XCTAssertFalse(FileManager.default.fileExists(atPath: a.path))
        for lock in [b, c] { age(lock) }
        XCTAssertTrue(eventually { [b, c].allSatisfy { age(of: $0) < 60 } })
        XCTAssertFalse(first.anyLost)
        XCTAssertFalse(second.anyLost)

        // The last run ends: no timer is left in a process that holds no lock.
        second.releaseAll()
        XCTAssertFalse(LockRefresher.every(LeaseJudge.refreshInterval(lease: lease, atLeast: 0.05)).isTicking)
    }

    func testALockBrokenByAnotherProcessIsReportedLostAtTheNextRefresh() throws {
        let directory = ModelDirectory(base.appendingPathComponent("model"))
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let run = HeldLocks(lease: lease)
        let lock = try take("config.json", in: directory)
        run.add(lock)
        // Broken: moved aside and replaced by another holder's lock (another inode).
        XCTAssertEqual(rename(lock.path, lock.path + ".broken.t.1.1"), 0)
        XCTAssertTrue(FileManager.default.createFile(atPath: lock.path, contents: Data("other@1".utf8)))
        XCTAssertTrue(eventually { run.anyLost })
        run.releaseAll()
        XCTAssertTrue(FileManager.default.fileExists(atPath: lock.path), "the other holder's lock is not released by this run")
    }
}
