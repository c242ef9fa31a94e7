// The spool's wake word: a futex in a shared file mapping, so a marker published by one
// process wakes waiters that have no inotify instance (docs/protocol.md, "Waking waiters").
import Foundation
import Spool
import XCTest

final class WakeWordTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("wakeword-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    func testAWakeThroughOneMappingEndsASleepOnAnother() throws {
        // Two mappings of the same file, as two processes would have: the kernel keys the futex
        // by inode and offset, not by address.
        let sleeper = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))
        let waker = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))
        let before = sleeper.generation
        let woken = LockedBox<Bool?>(nil)
        let ended = DispatchSemaphore(value: 0)
        Thread {
            woken.value = sleeper.wait(whileGeneration: before, seconds: 60)
            ended.signal()
        }.start()
        waker.wakeAll()
        XCTAssertEqual(ended.wait(timeout: .now() + 60), .success, "the sleeper was never woken")
        XCTAssertEqual(woken.value, true, "the sleep ran out instead of being woken")
        XCTAssertEqual(sleeper.generation, before &+ 1)
    }

    func testASleepNobodyEndsRunsOut() throws {
        let word = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))
        XCTAssertFalse(word.wait(whileGeneration: word.generation, seconds: 0.02))
        // A generation that already moved returns at once, as woken.
        XCTAssertTrue(word.wait(whileGeneration: word.generation &+ 5, seconds: 60))
    }

    func testATruncatedWakeFileIsNoSignalAndTheWordWorksAgain() throws {
        // `truncate -s 0 spool/wake` under live mappings: any load through them would be a SIGBUS.
        let sleeper = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))
        let waker = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))
        XCTAssertEqual(truncate(root + "/wake", 0), 0)
        XCTAssertEqual(sleeper.generation, 0, "read through the file, and the file given its page back")
        XCTAssertEqual(truncate(root + "/wake", 0), 0)
        waker.wakeAll()  // repairs and bumps, in the kernel
        XCTAssertEqual(sleeper.generation, 1)
        XCTAssertEqual(truncate(root + "/wake", 0), 0)
        XCTAssertFalse(sleeper.wait(whileGeneration: 0, seconds: 0.02), "a nap, not a crash, while the word is unusable")
        assertWakes(sleeper, by: waker, "the repaired word wakes sleepers again")
    }

    func testAReplacedWakeFileIsFollowed() throws {
        let sleeper = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))
        XCTAssertEqual(unlink(root + "/wake"), 0)
        let waker = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))  // a publisher makes a new one
        XCTAssertTrue(sleeper.wait(whileGeneration: sleeper.generation, seconds: 60), "the handle moves to the new file at once")
        assertWakes(sleeper, by: waker, "woken through the new file")
    }

    /// A thread sleeping on `sleeper` at its current generation is woken by `waker.wakeAll()`.
    private func assertWakes(_ sleeper: WakeWord, by waker: WakeWord, _ message: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        let before = sleeper.generation
        let ended = DispatchSemaphore(value: 0)
        Thread {
            sleeper.wait(whileGeneration: before, seconds: 60)
            ended.signal()
        }.start()
        waker.wakeAll()
        XCTAssertEqual(ended.wait(timeout: .now() + 60), .success, message, file: file, line: line)
    }

    func testPublishingAMarkerBumpsBothWords() throws {
        let spool = try Spool(base: URL(fileURLWithPath: root), node: "n1", lease: 30)
        for listener in WakeWord.Listener.allCases {
            let word = try XCTUnwrap(spool.wakeWord(for: listener))
            let before = word.generation
            spool.markDone("request-\(listener)-1")
            XCTAssertEqual(word.generation, before &+ 1, "\(listener)")
            spool.markFailed("request-\(listener)-2", FailureRecord(.other, "gone"))
            XCTAssertEqual(word.generation, before &+ 2, "\(listener)")
            XCTAssertEqual(spool.state(of: "request-\(listener)-1"), .done)
        }
    }

    /// The supervisor wakes waiters before its pass and slots after it: a bump of one word
    /// leaves the other's sleepers asleep.
    func testEachListenerHasItsOwnWord() throws {
        let slots = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .slots))
        let waiters = try XCTUnwrap(WakeWord(spoolRoot: root, listener: .waiters))
        let (slotsBefore, waitersBefore) = (slots.generation, waiters.generation)
        waiters.wakeAll()
        XCTAssertEqual(slots.generation, slotsBefore)
        XCTAssertEqual(waiters.generation, waitersBefore &+ 1)
        XCTAssertFalse(slots.wait(whileGeneration: slotsBefore, seconds: 0.2), "the slots' word did not move")
        slots.wakeAll()
        XCTAssertEqual(slots.generation, slotsBefore &+ 1)
        XCTAssertEqual(waiters.generation, waitersBefore &+ 1)
        slots.wakeEveryone()
        XCTAssertEqual(slots.generation, slotsBefore &+ 2)
        XCTAssertEqual(waiters.generation, waitersBefore &+ 2)
    }
}

private final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
