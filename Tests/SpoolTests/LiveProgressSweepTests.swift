// The folders LiveProgress keeps on /dev/shm (with ReadyView's and NodeNamesView's files) go with
// their spool: the process that makes a folder removes this account's folders whose spool is gone
// and that hold no record of a live process; a live spool's folder, and a gone spool's folder that
// a running worker still writes in, stay.
import Foundation
import Spool
@testable import TestSupport
import XCTest

final class LiveProgressSweepTests: ScratchDirectoryTestCase {
    private var folders: [String] = []
    private let job = "0123456789abcdef01234567.000000"

    override func tearDownWithError() throws {
        for folder in folders { try? FileManager.default.removeItem(atPath: folder) }
        try super.tearDownWithError()
    }

    /// A spool under the scratch folder, and its record on /dev/shm, made as a worker makes it
    /// (its first range) and left with no range in flight.
    private func spoolWithRecord(_ name: String) throws -> (base: URL, live: LiveProgress) {
        let base = scratch.appendingPathComponent(name)
        guard let live = LiveProgress(spool: try Spool(base: base, node: "t")) else { throw XCTSkip("no writable /dev/shm") }
        folders.append(live.directory)
        live.begin(job: job)?.remove()
        XCTAssertTrue(FileManager.default.fileExists(atPath: live.directory), "begin made \(live.directory)")
        return (base, live)
    }

    func testTheFolderOfADeletedSpoolGoesAtTheNextOpenAndALiveSpoolsStays() throws {
        let gone = try spoolWithRecord("gone")
        // a worker of the gone spool was killed with SIGKILL mid-range: its record names a dead pid
        let dead = try deadPid()
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(gone.live.directory)/\(job)@\(dead)", contents: nil))
        let kept = try spoolWithRecord("kept")
        let busy = try spoolWithRecord("busy")
        let running = try XCTUnwrap(busy.live.begin(job: job), "a range in flight in this (live) process")
        defer { running.remove() }
        // Made before the deletions, so no later spool takes a deleted spool's inode (and name).
        let next = scratch.appendingPathComponent("next")
        let nextSpool = try Spool(base: next, node: "t")
        try FileManager.default.removeItem(at: gone.base)
        try FileManager.default.removeItem(at: busy.base)

        let opened = try XCTUnwrap(LiveProgress(spool: nextSpool))
        folders.append(opened.directory)
        opened.begin(job: job)?.remove()

        XCTAssertFalse(FileManager.default.fileExists(atPath: gone.live.directory),
                       "the folder of a deleted spool, with a dead pid's record, is removed at the next open")
        XCTAssertTrue(FileManager.default.fileExists(atPath: kept.live.directory), "a live spool's folder stays")
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(busy.live.directory)/\(job)@\(getpid())"),
                      "a deleted spool's folder stays while a live process has a record in it")
        XCTAssertTrue(FileManager.default.fileExists(atPath: opened.directory))
    }

    func testADrainingDaemonRemovesItsFolderUnlessAnotherProcessHasARecordThere() throws {
        let spool = try spoolWithRecord("drained")
        let running = try XCTUnwrap(spool.live.begin(job: job))
        spool.live.removeIfUnused()
        XCTAssertTrue(FileManager.default.fileExists(atPath: spool.live.directory), "a live record keeps the folder")
        running.remove()
        // The folder still names its spool, so a later sweep can judge it.
        let again = try XCTUnwrap(LiveProgress(spool: try Spool(base: spool.base, node: "t")))
        again.removeIfUnused()
        XCTAssertFalse(FileManager.default.fileExists(atPath: spool.live.directory), "nothing else there: the folder goes")
    }

    /// A worker killed mid-range whose parent has not reaped it yet writes nothing more: its
    /// record is not counted as bytes in flight, and goes (`LeaseJudge.processRunning`, the one
    /// local-process check, for which a zombie is gone).
    func testTheRecordOfAZombieWorkerIsNotCountedAndGoes() throws {
        let (_, live) = try spoolWithRecord("zombie")
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&pid, "/bin/true", nil, nil, argv, environ), 0)
        defer { var status: Int32 = 0; waitpid(pid, &status, 0) }
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.contains(") Z ") != true {
            usleep(10_000)
        }
        let record = "\(live.directory)/\(job)@\(pid)"
        XCTAssertTrue(FileManager.default.createFile(atPath: record, contents: Data(count: 4096)))
        XCTAssertEqual(live.read(), [:], "a zombie's bytes are not in flight")
        XCTAssertFalse(FileManager.default.fileExists(atPath: record), "a zombie's record goes")
    }
}
