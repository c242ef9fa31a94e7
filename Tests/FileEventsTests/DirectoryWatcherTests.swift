// DirectoryWatcherTests - the process's inotify watcher against real directories and files.
import FileEvents
import Foundation
import XCTest

final class DirectoryWatcherTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "watcher-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A burst of changes is one wake, not one per event: a supervisor woken by each of the
    /// ~5 events of every range ran a full pass per event (700 passes for a 1 GiB file).
    func testABurstOfChangesWakesTheWaiterOnceNotOncePerEvent() throws {
        let watcher = try XCTUnwrap(DirectoryWatcher.shared, "inotify is unavailable here")
        XCTAssertTrue(watcher.watch(directory))
        for i in 0..<200 {  // create + close-write each, then the unlinks: 600 events
            _ = FileManager.default.createFile(atPath: directory + "/f\(i)", contents: Data("x".utf8))
        }
        for i in 0..<200 { unlink(directory + "/f\(i)") }
        var wakes = 0
        while watcher.wait(seconds: 0.3) {
            wakes += 1
            if wakes > 20 { break }
        }
        // The burst is queued before the first wait: one wake drains it. Stray events of other
        // tests' directories (one process, one watcher) may add one or two.
        XCTAssertGreaterThanOrEqual(wakes, 1, "the changes did not wake the watcher")
        XCTAssertLessThanOrEqual(wakes, 3, "each queued event woke the watcher again")
    }

    /// A change after a wake wakes the next wait; a quiet directory lets a sub-second wait expire.
    func testAChangeAfterAWakeWakesTheNextWaitAndQuietTimesOut() throws {
        let watcher = try XCTUnwrap(DirectoryWatcher.shared, "inotify is unavailable here")
        XCTAssertTrue(watcher.watch(directory))
        while watcher.wait(seconds: 0.2) {}  // whatever earlier tests left queued
        let started = Date()
        XCTAssertFalse(watcher.wait(seconds: 0.2), "a quiet directory woke the watcher")
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.9, "a 0.2 s wait lasted a second or more")
        let writer = Thread { [directory] in
            usleep(100_000)
            _ = FileManager.default.createFile(atPath: directory + "/late", contents: Data())
        }
        writer.start()
        XCTAssertTrue(watcher.wait(seconds: 5), "a file created during the wait did not wake it")
    }

    /// A wake tells which watched directories the events came from (a supervisor woken only by
    /// parts its own workers published skips the full pass): the one written, not the quiet one.
    func testAWakeTellsWhichDirectoriesChanged() throws {
        let watcher = try XCTUnwrap(DirectoryWatcher.shared, "inotify is unavailable here")
        let busy = directory + "/busy", quiet = directory + "/quiet"
        for d in [busy, quiet] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        XCTAssertTrue(watcher.watch(busy, arrivalsOnly: true))
        XCTAssertTrue(watcher.watch(quiet, arrivalsOnly: true))
        while watcher.wait(seconds: 0.2) {}  // whatever earlier tests left queued
        _ = watcher.takeChanged()
        XCTAssertEqual(watcher.takeChanged(), [], "nothing changed since the last take")
        _ = FileManager.default.createFile(atPath: busy + "/part", contents: Data("x".utf8))
        XCTAssertTrue(watcher.wait(seconds: 5), "a file created in a watched directory did not wake the watcher")
        let changed = try XCTUnwrap(watcher.takeChanged(), "the events' directories could not be told")
        XCTAssertTrue(changed.contains(busy), "the written directory is not among \(changed)")
        XCTAssertFalse(changed.contains(quiet), "a quiet directory was reported changed: \(changed)")
    }
}
