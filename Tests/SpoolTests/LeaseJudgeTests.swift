// The one lease judge (`LeaseJudge`, `LeaseRound`, docs/protocol.md "Liveness") and the spool's
// sites that use it: revocation, supervisors' liveness, the temp sweep, adoption, staging locks.
// Pinned: unknown is never acted on, and a zombie holder is dead.
import Foundation
import ModelCache
import SharedFiles
import Spool
@testable import TestSupport
import XCTest

final class LeaseJudgeTests: ScratchDirectoryTestCase {
    /// A child that has exited but is not reaped: `kill(pid, 0)` still succeeds for it.
    private func zombie() throws -> pid_t {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&pid, "/bin/true", nil, nil, argv, environ), 0)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), stat.contains(") Z ") { break }
            usleep(10_000)
        }
        XCTAssertEqual(kill(pid, 0), 0, "the zombie still has a process table entry")
        return pid
    }

    private func reap(_ pid: pid_t) {
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// Makes `path` with an mtime `age` seconds in the past.
    private func make(_ path: String, age: Double, contents: String = "") {
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(contents.utf8)))
        let then = Date().addingTimeInterval(-age).timeIntervalSince1970
        var times = [timespec(tv_sec: Int(then), tv_nsec: 0), timespec(tv_sec: Int(then), tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
    }

    func testEveryCadenceIsAQuarterLeaseWithItsCallersFloor() {
        XCTAssertEqual(LeaseJudge.refreshInterval(lease: 30), 7.5)
        XCTAssertEqual(LeaseJudge.refreshInterval(lease: 0.1, atLeast: 0.05), 0.05, "a timer's floor on a test's tiny lease")
        XCTAssertEqual(LeaseJudge.refreshInterval(lease: 30, atLeast: 3), 7.5)
        // The heartbeat and the trust in a node seen serving are one value, at most four a second.
        XCTAssertEqual(LeaseJudge.heartbeatInterval(lease: 30), 7.5)
        XCTAssertEqual(LeaseJudge.heartbeatInterval(lease: 0.4), 0.25)
    }

    func testAZombieHolderIsDead() throws {
        let pid = try zombie()
        defer { reap(pid) }
        XCTAssertFalse(LeaseJudge.processRunning(pid), "a zombie writes nothing more")
        XCTAssertTrue(LeaseJudge.processRunning(getpid()))
        let record = scratch.appendingPathComponent("record").path
        make(record, age: 0)
        let judge = LeaseJudge(localNode: "here", lease: 30, probe: scratch.path)
        // A fresh record, but its local holder is a zombie: expired at once, with no clock needed.
        let round = judge.round(now: { nil })
        XCTAssertEqual(round.liveness(of: record, holder: LockOwner(node: "here", pid: pid)), .expired)
        XCTAssertEqual(round.liveness(of: record, holder: LockOwner(node: "here", pid: pid), localByPid: true), .expired)
        XCTAssertEqual(judge.round().liveness(of: record, holder: LockOwner(node: "here", pid: getpid())), .live)
    }

    func testUnknownIsNeverActedOn() {
        let record = scratch.appendingPathComponent("record").path
        make(record, age: 3600)
        let judge = LeaseJudge(localNode: "here", lease: 30, probe: scratch.path)
        let far = LockOwner(node: "far", pid: 1)
        XCTAssertEqual(judge.round(now: { nil }).liveness(of: record, holder: far), .unknown, "no clock: no verdict")
        XCTAssertEqual(judge.round().liveness(of: record, holder: far), .expired, "an hour old on the server's clock")
        XCTAssertEqual(judge.round().liveness(of: record + ".absent", holder: far), .unknown, "no record: no verdict")
        XCTAssertEqual(judge.round().age(.unknown(ESTALE)), .unknown, "a stale handle: no verdict")
        XCTAssertEqual(judge.round().liveness(of: record, holder: far, lease: 7200), .live)
    }

    func testTheServerClockIsReadOnlyWhenALeaseIsJudged() throws {
        let reads = Counter()
        let round = LeaseJudge(localNode: "here", lease: 30, probe: scratch.path).round(now: { reads.add(); return Date().timeIntervalSince1970 })
        let record = scratch.appendingPathComponent("record").path
        make(record, age: 0)
        XCTAssertEqual(round.liveness(of: record, holder: LockOwner(node: "here", pid: getpid()), localByPid: true), .live)
        XCTAssertEqual(reads.value, 0, "a live local pid needs no clock")
        _ = round.liveness(of: record, holder: LockOwner(node: "far", pid: 1))
        _ = round.liveness(of: record, holder: LockOwner(node: "far", pid: 2))
        XCTAssertEqual(reads.value, 1, "one reading of the clock per round")
    }

    /// Each spool site under a clock that cannot be read: nothing is revoked, swept or taken over;
    /// with the clock, the same records are expired.
    func testTheSpoolActsOnlyOnWhatItJudged() throws {
        let blind = try Spool(base: scratch, node: "here", lease: 30, clock: { nil })
        let seeing = try Spool(base: scratch, node: "here", lease: 30)
        let job = String(repeating: "a", count: 24) + ".000000"
        let claim = blind.layout.path(.claimed, "\(job)@far@1")
        make(claim, age: 3600)
        let heartbeat = blind.layout.supervisor("far")
        make(heartbeat, age: 3600, contents: "1")
        let temp = blind.layout.path(.tmp, "request@far@1@1")
        make(temp, age: 40 * 3600)

        XCTAssertEqual(blind.revokeExpiredClaims(), [], "no clock: a foreign claim is not revoked")
        XCTAssertTrue(FileManager.default.fileExists(atPath: claim))
        XCTAssertEqual(blind.liveSupervisors(), ["far"], "no clock: a foreign supervisor is not taken over from")
        XCTAssertEqual(blind.sweepTemp(), 0, "no clock: a foreign temp file stays")

        XCTAssertEqual(seeing.revokeExpiredClaims(), [job])
        XCTAssertTrue(FileManager.default.fileExists(atPath: seeing.layout.ready(job)), "the range is ready again")
        XCTAssertEqual(seeing.liveSupervisors(), [])
        XCTAssertEqual(seeing.sweepTemp(), 1)
    }

    /// Another node's claims are its own supervisor's to judge while that supervisor's heartbeat
    /// is fresh (a pass looks at one heartbeat per node, not at every claim); once the heartbeat
    /// is a lease old, or the record is gone, its old claims are revoked here; three leases old,
    /// its record is retired.
    func testAnotherNodesClaimsAreJudgedHereOnlyOnceItsSupervisorIsGone() throws {
        let spool = try Spool(base: scratch, node: "here", lease: 30)
        let job = String(repeating: "c", count: 24) + ".000002"
        let claim = spool.layout.path(.claimed, "\(job)@far@1")
        make(claim, age: 3600)
        make(spool.layout.supervisor("far"), age: 0, contents: "1")
        XCTAssertEqual(spool.revokeExpiredClaims(), [], "node far's supervisor lives: it judges its own worker")
        XCTAssertTrue(FileManager.default.fileExists(atPath: claim))
        // A node seen serving counts as serving for a quarter lease, and the records are looked
        // at for retirement once per lease: the later looks are another process's (a fresh Spool).
        make(spool.layout.supervisor("far"), age: 60, contents: "1")
        XCTAssertEqual(spool.revokeExpiredClaims(), [], "seen serving under a quarter lease ago: not looked at again yet")
        let later = try Spool(base: scratch, node: "here", lease: 30)
        XCTAssertEqual(later.retireDeadSupervisors(), [], "a lease old is not yet three")
        XCTAssertEqual(later.revokeExpiredClaims(), [job], "node far is gone: its expired claim goes back to ready")
        make(spool.layout.supervisor("far"), age: 100, contents: "1")
        XCTAssertEqual(later.retireDeadSupervisors(), [], "the records were looked at less than a lease ago")
        XCTAssertEqual(try Spool(base: scratch, node: "here", lease: 30).retireDeadSupervisors(), ["far"])
        XCTAssertEqual(spool.supervisorRecordCount(), 0)
    }

    /// Other nodes' temp files are judged by a process at most every 10 minutes (they are kept
    /// 36 hours): a sweep every 10 s while busy looked at the heartbeat of every node with a file
    /// in tmp/, and in a herd every node has one there, so every node's sweep cost a lookup per node.
    func testOtherNodesTempFilesAreJudgedAtMostEveryTenMinutes() throws {
        let spool = try Spool(base: scratch, node: "here", lease: 30)
        XCTAssertEqual(spool.sweepTemp(), 0, "nothing to sweep yet")
        let temp = spool.layout.path(.tmp, "request@far@1@1")
        make(temp, age: 40 * 3600)
        make(spool.layout.supervisor("far"), age: 3600, contents: "1")  // node far is gone
        XCTAssertEqual(spool.sweepTemp(), 0, "other nodes' files judged under 10 minutes ago: node far's not looked at")
        XCTAssertTrue(FileManager.default.fileExists(atPath: temp))
        XCTAssertEqual(try Spool(base: scratch, node: "here", lease: 30).sweepTemp(), 1, "a process due to judge them sweeps it")
        XCTAssertFalse(FileManager.default.fileExists(atPath: temp))
    }

    /// Another node's temp files are swept by that node while its supervisor serves; once it is
    /// gone, one older than 36 hours is swept here.
    func testAServingNodesTempFilesAreLeftToIt() throws {
        let spool = try Spool(base: scratch, node: "here", lease: 30)
        let temp = spool.layout.path(.tmp, "request@far@1@1")
        make(temp, age: 40 * 3600)
        make(spool.layout.supervisor("far"), age: 0, contents: "1")
        XCTAssertEqual(spool.sweepTemp(), 0, "node far serves: its temp files are its own to sweep")
        XCTAssertTrue(FileManager.default.fileExists(atPath: temp))
        make(spool.layout.supervisor("far"), age: 3600, contents: "1")
        XCTAssertEqual(try Spool(base: scratch, node: "here", lease: 30).sweepTemp(), 1, "node far is gone")
        XCTAssertFalse(FileManager.default.fileExists(atPath: temp))
    }

    func testAZombieClaimantsClaimIsRevokedAtOnce() throws {
        let pid = try zombie()
        defer { reap(pid) }
        let spool = try Spool(base: scratch, node: "here", lease: 30, clock: { nil })
        let job = String(repeating: "b", count: 24) + ".000001"
        make(spool.layout.path(.claimed, "\(job)@here@\(pid)"), age: 0)
        XCTAssertEqual(spool.revokeExpiredClaims(), [job], "a zombie holder is dead: no lease to wait for")
        // A supervisor record naming a zombie: not live.
        make(spool.layout.supervisor("here"), age: 0, contents: "\(pid)")
        XCTAssertEqual(spool.liveSupervisors(), [])
        XCTAssertTrue(spool.localSupervisorIsDead())
    }

    func testAStagingLockOfAZombieIsStale() throws {
        let pid = try zombie()
        defer { reap(pid) }
        let lock = scratch.appendingPathComponent("x.lock").path
        make(lock, age: 0, contents: "here@\(pid)")
        XCTAssertTrue(StagingLock.isStale(lock, localNode: "here", lease: 30, probe: scratch.path))
        make(lock, age: 0, contents: "far@\(pid)")
        XCTAssertFalse(StagingLock.isStale(lock, localNode: "here", lease: 30, probe: scratch.path), "another node's fresh lock")
    }
}

private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
