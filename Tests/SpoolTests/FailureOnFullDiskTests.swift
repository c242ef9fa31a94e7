// FailureOnFullDiskTests - a failure recorded on a disk with no block left is still published:
// unpublished, the request it fails would wait for ever (a daemon's full disk, under load).
import Foundation
import Spool
@testable import TestSupport
import XCTest

final class FailureOnFullDiskTests: HubTestCase {
    func testAFailureRecordedWithNoRoomLeftIsPublishedAndReadsAsAFullDisk() throws {
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        guard TmpfsMount.mount(cacheBase.path, options: "size=1m") else { throw XCTSkip("cannot mount a tmpfs here (not root?)") }
        defer { TmpfsMount.unmount(cacheBase.path) }
        let spool = try Spool(base: cacheBase, node: "t")
        // Fill every block of the filesystem the spool is on.
        let filler = cacheBase.appendingPathComponent("filler").path
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let block = [UInt8](repeating: 1, count: 4096)
        while block.withUnsafeBytes({ write(fd, $0.baseAddress, 4096) }) == 4096 {}
        XCTAssertTrue(errno == ENOSPC, "the filesystem is full")
        close(fd)

        spool.recordFailure("0123456789abcdef01234567", FailureRecord(.diskFull, "the disk is full: 1 MiB more are needed, 0 bytes are free"))
        let recorded = spool.failure(of: "0123456789abcdef01234567")
        XCTAssertEqual(recorded?.kind, .diskFull, "the failure is published though its reason found no room: \(String(describing: recorded))")
    }
}
