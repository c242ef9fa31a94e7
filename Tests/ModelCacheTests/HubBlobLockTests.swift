// HubBlobLock - the flock'd blob lock of a huggingface_hub cache: on a file that stays, and a
// wait for it that says what it waits for and ends at its bound.
import Foundation
import ModelCache
import XCTest

final class HubBlobLockTests: XCTestCase {
    func testTheLockIsFlockOnAFileThatStaysAndAWaitCanBeBounded() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hub-lock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.path + "/.locks/models--org--m/abc.lock"
        let first = try XCTUnwrap(HubBlobLock.acquire(path, timeout: 1))
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o664, "group-writable, as huggingface_hub makes it")
        // Another holder (its own open file description, as another process would have) waits.
        let started = Date()
        XCTAssertNil(HubBlobLock.acquire(path, timeout: 0.3), "held elsewhere")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3)
        let fd = open(path, O_RDWR)
        defer { close(fd) }
        XCTAssertEqual(flock(fd, LOCK_EX | LOCK_NB), -1, "an flock(2) holder, as Python's filelock sees it")
        first.release()
        XCTAssertEqual(access(path, F_OK), 0, "released, the file stays")
        XCTAssertEqual(flock(fd, LOCK_EX | LOCK_NB), 0)
        XCTAssertNil(HubBlobLock.acquire(path, timeout: 0.1), "now Python's side holds it")
        flock(fd, LOCK_UN)
        XCTAssertNotNil(HubBlobLock.acquire(path, timeout: 1))
    }

    /// Issue 22, defect 5: a blob lock another process holds is waited for within a bound; after
    /// a while the wait says what it waits for, and at the bound it is an error naming the lock.
    func testAWaitForAHeldBlobLockSaysWhatItWaitsForAndEndsWithAnErrorAtItsBound() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hub-lock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.path + "/.locks/models--org--m/abc.lock"
        let holder = try XCTUnwrap(HubBlobLock.acquire(path, timeout: 1))
        defer { holder.release() }
        var notices: [String] = []
        let started = Date()
        XCTAssertThrowsError(try HubBlobLock.wait(path, timeout: 0.6, noticeAfter: 0.2, onWaiting: { notices.append($0) })) { error in
            guard case CacheError.lockWaitExpired(let lockPath, _, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(lockPath, path)
            XCTAssertTrue("\(error)".contains("SPEECH_FETCH_LOCK_WAIT_SECONDS"), "\(error)")
        }
        let waited = Date().timeIntervalSince(started)
        XCTAssertGreaterThanOrEqual(waited, 0.6)
        XCTAssertLessThan(waited, 3, "the wait ends at its bound")
        XCTAssertEqual(notices.count, 1, "said once: \(notices)")
        XCTAssertTrue(notices.first?.hasPrefix("waiting for lock \(path)") == true, "\(notices)")
    }
}
