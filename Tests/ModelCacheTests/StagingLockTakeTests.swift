// Taking a staging lock while another file's holder removes `.incomplete/`: a pass that plans or
// splices several files at once releases one file's lock (and removes the emptied folder) while it
// takes another's (issue 32, D7: a 10,000-file download through the daemon failed with "cannot
// create the staging lock …: No such file or directory").
import Foundation
@testable import ModelCache
import SharedFiles
@testable import TestSupport
import XCTest

final class StagingLockTakeTests: ScratchDirectoryTestCase {
    /// The state the race leaves: `.incomplete/` was made, then removed by another file's holder
    /// before this lock's create. The lock is taken (the folder made again), not refused.
    func testALockIsTakenWhenItsStagingFolderWasRemovedMeanwhile() throws {
        let directory = ModelDirectory(scratch.appendingPathComponent("model"))
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let path = directory.stagingDirectory.path + "/" + ModelLayout.lockName("config.json")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.stagingDirectory.path))
        let lock = try XCTUnwrap(try StagingLock.take(lockPath: path, owner: LockOwner(node: "t"), lease: 30))
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
        lock.release()
    }
}
