// SpoolSupervisors - each node's supervisor record and lock in `supervisors/`: taken once at
// start, its mtime the heartbeat, judged live or gone by the lease judge, retired when the node
// is gone (docs/protocol.md, "Liveness").
import Foundation
import SharedFiles

extension Spool {
    /// Writes this node's supervisor record (its pid), once at start: from then on its mtime is
    /// the heartbeat (`refreshHeartbeat`).
    public func heartbeat() {
        let temp = tempPath("supervisor")
        if (try? SpoolFS.writeNew(temp, Data("\(owner.pid)".utf8))) != nil { rename(temp, layout.supervisor(owner.node)) }
    }

    /// The heartbeat: a touch of the record (`utimensat`), no write, no sync, no rename. A record
    /// that is positively gone (the spool was cleaned under us) is written again.
    /// `recheckPath`: also make sure the path still names the record this process touches (a
    /// cleaned spool), writing it again if not (the safety pass).
    public func refreshHeartbeat(recheckPath: Bool = false) {
        let held = lock.withLock { heldHeartbeat }
        if recheckPath, held.stillNamesHeldFile() == false, SharedFS.exists(layout.supervisor(owner.node)) == false {
            heartbeat()
        }
        if !held.touch() && SharedFS.exists(layout.supervisor(owner.node)) == false { heartbeat() }
    }

    /// Takes this node's supervisor lock, `fetchd-<node>.lock`, atomically, then writes the
    /// record (`heartbeat`): the lock is published with `link(2)`, so of two supervisors of one node
    /// started at the same instant exactly one gets it. A lock the lease judge calls expired (its
    /// pid not running here; one that is not a pid) is moved aside and replaced; moved aside by
    /// someone else's judgement meanwhile, it is put back. The record itself is replaced by
    /// rename, so a caller watching it never sees it missing while a daemon restarts.
    /// Returns nil when this process holds the lock, else the pid of the live (or unknown: never
    /// acted on, -1) holder.
    public func takeSupervisorRecord() throws -> Int32? {
        let path = layout.supervisorLock(owner.node)
        for attempt in 0..<20 {
            if attempt > 0 { usleep(50_000) }
            let temp = tempPath("supervisor-lock")
            try SpoolFS.writeNew(temp, Data("\(owner.pid)".utf8))
            if try SpoolFS.publishOnce(temp, as: path) {
                heartbeat()
                return nil
            }
            let judged: Int32?
            switch SharedFS.read(path) {
            case .absent: continue
            case .unknown: if attempt == 19 { return -1 } else { continue }
            case .found(let data): judged = Int32(String(decoding: data, as: UTF8.self))
            }
            if let pid = judged {
                if pid == owner.pid {
                    heartbeat()
                    return nil
                }
                let verdict = leaseRound().liveness(of: path, holder: LockOwner(node: owner.node, pid: pid), localByPid: true)
                guard verdict == .expired else { return pid }
            }
            // Expired (or not a pid at all): move it aside, and keep it moved only if it is the
            // lock judged (another starter may have replaced it with its own meanwhile).
            let grave = tempPath("supervisor-gone")
            guard rename(path, grave) == 0 else { continue }
            let moved = SharedFS.read(grave).value.map { Int32(String(decoding: $0, as: UTF8.self)) }
            if let moved, moved != judged { link(grave, path) }
            unlink(grave)
        }
        return -1
    }

    /// Removes this node's supervisor record and lock, if they still name this process.
    public func retireSupervisor() {
        if supervisorPID(of: owner.node) == owner.pid { unlink(layout.supervisor(owner.node)) }
        let lock = layout.supervisorLock(owner.node)
        if SharedFS.read(lock).value.map({ Int32(String(decoding: $0, as: UTF8.self)) }) == owner.pid { unlink(lock) }
    }

    /// The pid a node's supervisor record names; nil when there is none or it cannot be read.
    public func supervisorPID(of node: String) -> Int32? {
        SharedFS.read(layout.supervisor(node)).value.flatMap { Int32(String(decoding: $0, as: UTF8.self)) }
    }

    /// True when this node's supervisor record names a process that is gone (killed: a clean
    /// exit removes the record). A dead local holder is judged at once, never by lease age.
    public func localSupervisorIsDead() -> Bool {
        guard let pid = supervisorPID(of: owner.node) else { return false }
        return !LeaseJudge.processRunning(pid)
    }

    /// True when some supervisor serves the spool (`liveSupervisors` is not empty), with this
    /// node's own looked at first: while the pid its record named is running, that answers
    /// with no look at the spool (a waiter asks every poll; a look at every node's record
    /// grew with the nodes).
    public func anySupervisorServes() -> Bool {
        ownSupervisorServes() || !liveSupervisors().isEmpty
    }

    /// True while the process this node's supervisor record names runs: a pid check, with the
    /// record read again only once that process is gone. Such a supervisor plans, splices and
    /// settles this node's requests (`servedElsewhere`), so its waiters leave that to it.
    public func ownSupervisorServes() -> Bool {
        // The pid is trusted only while the process it names is the one seen when the record
        // was read (its start time): a pid reused by another process after the daemon exited
        // sends the look back to the record.
        if let (pid, started) = lock.withLock({ localSupervisor }), LeaseJudge.processRunning(pid),
           LeaseJudge.startTime(of: pid) == started { return true }
        let pid = supervisorPID(of: owner.node)
        lock.withLock { localSupervisor = pid.map { ($0, LeaseJudge.startTime(of: $0)) } }
        return pid.map(LeaseJudge.processRunning) ?? false
    }

    /// True unless another node's supervisor is positively gone: its record absent, or its
    /// heartbeat older than the lease (unknown counts as serving: never acted on).
    /// A node seen serving is taken to serve for the next quarter lease without another look
    /// (its heartbeat is a touch every lease/4): a pass over many plans, parts and claims of
    /// many nodes costs one look per node and quarter lease, not one per pass. Gone is never
    /// remembered: it is what lets a caller act.
    public func supervisorServes(_ node: String, round: LeaseRound) -> Bool {
        let now = Date()
        if let seen = lock.withLock({ servingSeen[node] }), now.timeIntervalSince(seen) < LeaseJudge.heartbeatInterval(lease: lease) { return true }
        let mtime = SharedFS.mtime(layout.supervisor(node))
        if mtime.isAbsent { return false }
        let serves = round.age(mtime) != .expired
        lock.withLock {
            if serves { servingSeen[node] = now } else { servingSeen[node] = nil }
        }
        return serves
    }

    /// How many nodes have a supervisor record (a listing, no look at each record): what a
    /// worker splits the outstanding ranges by. A dead node's record counts until a supervisor's
    /// safety pass retires it (`retireDeadSupervisors`).
    public func supervisorRecordCount() -> Int? { supervisorRecordNames()?.count }

    /// The nodes that have a supervisor record (a listing, no look at each); nil when unlistable.
    public func supervisorRecordNames() -> [String]? {
        SharedFS.names(layout.path(.supervisors)).map { names in names.filter { !$0.hasPrefix(".") } }
    }

    /// Removes the records of other nodes whose heartbeat the lease judge calls expired three
    /// leases over (the node is gone; it writes its record again if it comes back). Returns them.
    @discardableResult
    public func retireDeadSupervisors() -> [String] {
        // Every record is looked at (one stat each): at most once per lease, whatever asks,
        // so a busy node's cost does not grow with the nodes.
        let now = Date()
        guard lock.withLock({
            guard now.timeIntervalSince(lastRetireLook) >= lease else { return false }
            lastRetireLook = now
            return true
        }) else { return [] }
        let round = leaseRound()
        var retired: [String] = []
        for node in SharedFS.names(layout.path(.supervisors)) ?? [] where !node.hasPrefix(".") && node != owner.node {
            let path = layout.supervisor(node)
            if round.liveness(of: path, holder: nil, lease: 3 * lease) == .expired, unlink(path) == 0 { retired.append(node) }
        }
        return retired
    }

    /// Nodes whose supervisor is alive, as the lease judge sees them: on this node, while the
    /// pid its record names runs (not a zombie); elsewhere, while its heartbeat is younger than
    /// the lease on the file server's clock. Unknown (a record or clock that cannot be read)
    /// counts as alive: a caller never takes over from a supervisor it merely failed to see.
    public func liveSupervisors() -> [String] {
        let round = leaseRound()
        return (SharedFS.names(layout.path(.supervisors)) ?? []).filter { node in
            let path = layout.supervisor(node)
            if node.hasPrefix(".") { return false }
            if node == owner.node {
                switch SharedFS.read(path) {
                case .found(let data):
                    guard let pid = Int32(String(decoding: data, as: UTF8.self)) else { return false }
                    return round.liveness(of: path, holder: LockOwner(node: node, pid: pid), localByPid: true) != .expired
                case .absent: return false
                case .unknown: return true
                }
            }
            let mtime = SharedFS.mtime(path)
            return !mtime.isAbsent && round.age(mtime) != .expired
        }
    }
}
