// Breaking another node's expired staging lock: two nodes may judge a killed node's lock expired
// at the same moment; the first breaks it and takes the lock, and the second, a few milliseconds
// late, must not move the first one's fresh lock aside. Another node's lock is broken only when a
// second look, a pause later, finds it expired too.
import Foundation
import ModelCache
import SharedFiles
@testable import TestSupport
import XCTest

final class LockBreakTests: ScratchDirectoryTestCase {
    private func writeLock(_ path: String, holder: String, age: Double) throws {
        try Data(holder.utf8).write(to: URL(fileURLWithPath: path))
        let when = Date().addingTimeInterval(-age).timeIntervalSince1970
        var times = [timespec(tv_sec: Int(when), tv_nsec: 0), timespec(tv_sec: Int(when), tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
    }

    func testALateBreakerLeavesTheLockTheFirstBreakerTook() throws {
        let directory = ModelDirectory(scratch.appendingPathComponent("model"))
        try FileManager.default.createDirectory(at: directory.stagingDirectory, withIntermediateDirectories: true)
        let path = directory.stagingDirectory.path + "/" + ModelLayout.lockName("model.safetensors")
        try writeLock(path, holder: "dead@1", age: 100)  // a killed node's lock, long expired
        // The first breaker, a moment ahead: it moves the expired lock away and takes its own.
        let first = Thread {
            Thread.sleep(forTimeInterval: 0.3)
            unlink(path)
            try? Data("first@2".utf8).write(to: URL(fileURLWithPath: path))
        }
        first.start()
        let late = StagingLock.acquire("model.safetensors", in: directory, owner: LockOwner(node: "late", pid: 3), lease: 5)
        XCTAssertNil(late, "the late breaker does not take the lock")
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "first@2", "the first breaker's lock is in place")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.stagingDirectory.path).filter { $0.contains(".broken.") }, [])
    }

    func testAnExpiredLockOfAnotherNodeIsBrokenAfterTheSecondLook() throws {
        let directory = ModelDirectory(scratch.appendingPathComponent("model"))
        try FileManager.default.createDirectory(at: directory.stagingDirectory, withIntermediateDirectories: true)
        let path = directory.stagingDirectory.path + "/" + ModelLayout.lockName("model.safetensors")
        try writeLock(path, holder: "dead@1", age: 100)
        let start = Date()
        let lock = try XCTUnwrap(StagingLock.acquire("model.safetensors", in: directory, owner: LockOwner(node: "me", pid: 3), lease: 5))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), StagingLock.secondLook)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "me@3")
        lock.release()
    }
}
