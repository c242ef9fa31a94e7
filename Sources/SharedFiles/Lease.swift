// Lease - the one judge of whether the holder of a lease is alive: staging locks, claims,
// supervisors' heartbeats, temp files and parts all ask it (docs/protocol.md, "Liveness").
//
// The rules, in order:
// 1. A holder on this node whose pid is not running (gone, or a zombie: a killed process its
//    parent has not reaped writes nothing more) is expired at once.
// 2. Otherwise the record's mtime is compared with "now" on the file server's clock (a probe
//    file touched and read back: every node's touches are stamped by that clock); older than the
//    lease is expired, else live.
// 3. Anything that could not be read — the record's mtime, the server's clock — is unknown, and
//    unknown is never acted on: nothing is revoked, broken, swept or taken over on it.
import Foundation

/// Who holds a lease: a node and a process on it.
public struct LockOwner: Sendable, Equatable, CustomStringConvertible {
    public let node: String
    public let pid: Int32

    public init(node: String, pid: Int32 = getpid()) {
        self.node = node
        self.pid = pid
    }

    /// `node@pid`, the form every claim in the cache carries.
    public var description: String { "\(node)@\(pid)" }

    public init?(tag: String) {
        guard let at = tag.lastIndex(of: "@"), let pid = Int32(tag[tag.index(after: at)...]) else { return nil }
        node = String(tag[..<at])
        self.pid = pid
    }

    /// This machine's name: `--node`, else the host name; only letters, digits, `-`, `_`, `.`.
    public static func localNode(_ override: String? = nil) -> String {
        var name = override ?? ProcessInfo.processInfo.hostName
        name = String(name.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0) ? Character($0) : "_" })
        return name.isEmpty ? "node" : name
    }
}

/// What a lease judge found.
public enum Liveness: Sendable, Equatable {
    case live
    case expired
    /// Could not be read now (a stale handle, EIO, a clock probe that failed): look again later.
    case unknown
}

/// Judges leases against one spool's or cache's clock probe.
public struct LeaseJudge: Sendable {
    /// This machine's node name: holders named with it are checked by pid.
    public let localNode: String
    /// Seconds a lease lasts without a refresh.
    public let lease: Double
    /// A file or directory on the filesystem whose clock counts (touched to read "now").
    public let probe: String

    public init(localNode: String, lease: Double, probe: String) {
        self.localNode = localNode
        self.lease = lease
        self.probe = probe
    }

    /// How often a holder refreshes its lease (a touch of its record), and so how long a look
    /// that found a holder live may be trusted: a quarter of the lease, so a holder may miss
    /// three refreshes before it expires. Every cadence tied to the lease is this value, with the
    /// floor its caller needs (`atLeast`: a timer that must not spin on a test's tiny lease, a
    /// look that costs a listing). `scripts/check-layers` refuses a second copy of the rule.
    public static func refreshInterval(lease: Double, atLeast floor: Double = 0) -> Double { max(floor, lease / 4) }

    /// A supervisor's heartbeat period (a touch of `supervisors/<node>`), at most four a second;
    /// a node seen serving is trusted to serve for as long without another look, which is right
    /// only while both are this one value.
    public static func heartbeatInterval(lease: Double) -> Double { refreshInterval(lease: lease, atLeast: 0.25) }

    /// A round of judgements that reads the server's clock at most once, when first needed.
    /// `now` replaces the probe (tests: a clock that cannot be read).
    public func round(now: (@Sendable () -> Double?)? = nil) -> LeaseRound {
        LeaseRound(judge: self, clock: now ?? { [probe] in SharedFS.serverNow(probe: probe) })
    }

    /// When the process `pid` started (clock ticks since boot, /proc/PID/stat's 22nd field); nil
    /// when it cannot be read. A pid with another start time is another process.
    public static func startTime(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // After the command's closing parenthesis: field 3 (the state) onwards.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    /// True while `pid` is a process on this machine that is not a zombie. The one local-process
    /// check of the project (`scripts/check-layers` refuses another `kill(pid, 0)`).
    public static func processRunning(_ pid: Int32) -> Bool {
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return true }
        let state = stat[stat.index(after: close)...].drop { $0 == " " }.first
        return state != "Z" && state != "X"
    }
}

/// One round of lease judgements (a supervisor's pass, one lock's breaking): the server's clock
/// is read once, on the first judgement that needs it, and not at all when none does.
public final class LeaseRound: @unchecked Sendable {
    public let judge: LeaseJudge
    private let clock: @Sendable () -> Double?
    private let lock = NSLock()
    private var read: Double??

    init(judge: LeaseJudge, clock: @escaping @Sendable () -> Double?) {
        self.judge = judge
        self.clock = clock
    }

    /// "Now" on the file server's clock; nil when the probe could not be touched or read.
    public var serverNow: Double? {
        lock.withLock {
            if let read { return read }
            let now = clock()
            read = .some(now)
            return now
        }
    }

    /// The liveness of a lease whose record is at `path`, held by `holder` (nil: no holder is
    /// named, so only its age counts). `localByPid`: a holder on this node is live exactly while
    /// its pid runs (a supervisor whose pass outlasts a lease is still serving).
    public func liveness(of path: String, holder: LockOwner?, lease: Double? = nil, localByPid: Bool = false) -> Liveness {
        if let holder, holder.node == judge.localNode {
            if !LeaseJudge.processRunning(holder.pid) { return .expired }
            if localByPid { return .live }
        }
        return age(SharedFS.mtime(path), lease: lease)
    }

    /// The liveness of a lease by the age of an mtime already read.
    public func age(_ mtime: Lookup<Double>, lease: Double? = nil) -> Liveness {
        guard case .found(let stamp) = mtime, let now = serverNow else { return .unknown }
        return now - stamp > (lease ?? judge.lease) ? .expired : .live
    }
}
