// Supervisor - speech-fetchd's main loop: keeps the worker processes alive, plans requests
// into range jobs, revokes dead claims, splices parts and settles requests.
import ByteUnits
import FileEvents
import Foundation
import ModelCache
import SharedFiles
import Spool
import Transfer

/// Why a supervisor cannot serve a base.
public enum SupervisorError: Error, Sendable, CustomStringConvertible {
    /// A live speech-fetchd of this node already serves the spool.
    case alreadyServed(spool: String, node: String, pid: Int32)
    /// This node's supervisor record could not be read or replaced (a stale handle, EIO).
    case recordUnreadable(spool: String, node: String)
    /// Not one worker process could be kept running (the open-file or process limit, a missing
    /// executable): a daemon without workers would take requests its callers wait on forever.
    case noWorkers(spool: String, reason: String)

    public var description: String {
        switch self {
        case .alreadyServed(let spool, let node, let pid):
            return "another speech-fetchd (pid \(pid)) already serves \(spool) as node \(node); this one exits "
                + "(stop that one first, or give this one another --node to run beside it)"
        case .recordUnreadable(let spool, let node):
            return "cannot read or replace \(spool)/supervisors/\(node) (the filesystem keeps failing: a stale handle or I/O error); "
                + "this speech-fetchd exits: check the mount and start it again"
        case .noWorkers(let spool, let reason):
            return "no worker process could be started for \(spool) (\(reason)); this speech-fetchd exits so that callers "
                + "fetch in their own processes instead of waiting: raise the open-file limit (ulimit -n, systemd's LimitNOFILE=) "
                + "or the process limit, check that the speech executable beside speech-fetchd runs, and start it again"
        }
    }
}

/// SIGHUP as the supervisor's loop sees it: the signals received so far (looked at every pass;
/// the signal's EINTR ends the loop's sleep) and what to do once a new one came.
public struct HangupRelay: Sendable {
    let count: @Sendable () -> Int
    let reopened: @Sendable () -> Void

    public init(count: @escaping @Sendable () -> Int, reopened: @escaping @Sendable () -> Void) {
        self.count = count
        self.reopened = reopened
    }
}

public final class Supervisor: @unchecked Sendable {
    public let spool: Spool
    let settings: DownloadSettings
    let sharing: SpoolSharing
    let workerCount: Int
    /// Ranges each worker process transfers at once.
    let slots: Int
    /// The command that starts one worker (this executable with `--worker …`).
    let workerCommand: [String]
    let environment: [String: String]
    let log: @Sendable (String) -> Void
    /// Work only on requests made on this node.
    let ownRequestsOnly: Bool
    private var workers: [Process] = []
    /// The worker process that makes the timed endgame looks (`Worker.endgameLookerVariable`).
    private var endgameLooker: Int32 = 0
    private var recentDeaths: [Date] = []
    /// Counters for `--metrics` (DaemonMetrics.swift), nil when nobody asks.
    public var metrics: DaemonMetrics?
    /// SIGHUP to pass on to the workers (`--log`), nil when the daemon has no log file.
    public var hangups: HangupRelay?
    /// `--max-cache-size`: the size cap's passes, nil without a cap.
    public var cacheCap: CacheCap?

    /// - Parameters:
    ///   - workers: worker processes (default: enough for `HF_DOWNLOAD_RANGE_CONCURRENCY` ranges).
    ///   - slots: ranges each worker transfers at once.
    public init(cacheBase: URL, workers: Int?, slots: Int = 4, workerCommand: [String], ownRequestsOnly: Bool = false,
                environment: [String: String] = ProcessInfo.processInfo.environment,
                log: @escaping @Sendable (String) -> Void) throws {
        settings = DownloadSettings.fromEnvironment(environment)
        (spool, sharing) = try Spool.served(base: cacheBase, settings: settings)
        spool.targets = RequestTargets.daemon(base: cacheBase, environment: environment)
        spool.endpoints = EndpointPolicy.daemon(environment: environment)
        let slots = max(1, slots)
        self.slots = slots
        workerCount = max(1, workers ?? (settings.concurrency + slots - 1) / slots)
        self.workerCommand = workerCommand + ["--slots", "\(slots)"] + (ownRequestsOnly ? ["--own-requests"] : [])
        self.ownRequestsOnly = ownRequestsOnly
        self.environment = environment
        self.log = log
    }

    /// Runs until `shouldStop` turns true, then drains: workers are asked to stop (their jobs
    /// go back to ready) and are waited for.
    /// - Throws: `SupervisorError.alreadyServed` when a live supervisor of this node serves
    ///   the spool: two would retire each other's heartbeat and double the workers.
    public func run(shouldStop: @escaping @Sendable () -> Bool) throws {
        // The record is taken atomically (two daemons started at the same instant: one runs).
        if let pid = try spool.takeSupervisorRecord() {
            guard pid > 0 else { throw SupervisorError.recordUnreadable(spool: spool.root, node: settings.node) }
            throw SupervisorError.alreadyServed(spool: spool.root, node: settings.node, pid: pid)
        }
        spool.targets?.publish(in: spool)  // what callers of this node may hand over
        spool.endpoints?.publish(in: spool)
        let spoolGuard = SpoolGuard(spool: spool)
        var stopped: (any Error)?
        for node in spool.liveSupervisors() where node != settings.node {
            log("node \(node)'s speech-fetchd serves this spool too; both take jobs from it")
        }
        log("serving \(spool.root) as node \(settings.node) with \(counted(workerCount, "worker")) × \(counted(slots, "range"))"
            + (ownRequestsOnly ? ", own requests only" : "")
            + (spool.endpoints.map { ", from \(([$0.own] + $0.allowed).joined(separator: ", "))" } ?? ""))
        spool.remembersSettled = true
        // Local changes wake the loop through inotify: a request, a part this node's workers
        // published, a failure. Another node's changes are seen through one stat of the spool's
        // generation per poll (docs/protocol.md, "Change-driven wake-ups").
        let watcher = DirectoryWatcher.shared
        for folder in [SpoolLayout.Folder.requests, .parts, .failures] { watcher?.watch(spool.layout.path(folder), arrivalsOnly: true) }
        let poll = sharing.supervisorPoll
        let planner = Planner(spool: spool, rangeSize: settings.rangeSize, ownRequestsOnly: ownRequestsOnly, metrics: metrics)
        let splicer = Splicer(spool: spool)
        let waiterWord = spool.wakeWord(for: .waiters)
        let slotWord = spool.wakeWord(for: .slots)
        var pace = SupervisorPace(lease: settings.lease)
        var requestLog = RequestLog()
        var lastOwnSplice = Date.distantPast
        // Plans another serving node asked for are that node's to splice.
        let leaves: (PlannedFile) -> Bool = { [spool] plan in spool.servedElsewhere(node: plan.node) }
        requestLog.metrics = metrics
        var lastGeneration: SpoolGeneration?? = .none
        var event = true
        var hangupsSeen = hangups?.count() ?? 0
        // A local event that only announced parts (this node's workers published them): they
        // are spliced by the node that asked for their file, so only a node with a request of
        // its own in flight looks (at parts/, not a full pass); parts of a node that is gone are
        // the busy pace's orphan splice.
        var partsOnly = false
        let partsFolder = spool.layout.path(.parts)
        while !shouldStop() {
            if let hangups, hangups.count() != hangupsSeen {
                hangupsSeen = hangups.count()
                hangups.reopened()
                for w in workers where w.isRunning { kill(w.processIdentifier, SIGHUP) }
            }
            let workersChanged = keepWorkers(shouldStop: shouldStop)
            if let reason = workerlessFor(seconds: 3) {
                stopped = SupervisorError.noWorkers(spool: spool.root, reason: reason)
                break
            }
            let now = Date()
            // One fstat of the generation through a held descriptor; the safety pass looks the
            // path up too (a replaced file is followed).
            let generation = spool.heldGenerationLook(recheckPath: pace.safetyDue(now: now))
            let moved = lastGeneration.map { $0 != generation } ?? true
            lastGeneration = .some(generation)
            // Another node's change: this node's waiters look at their markers at once, before
            // this pass (they sleep on their wake word and cost the file server nothing
            // meanwhile): a waiter for another node's request learns of its marker within one
            // poll, not a poll and a pass.
            if moved { waiterWord?.wakeAll() }
            // A generation that moved, or a local event (a request planted or asked again here):
            // settled requests are judged again and remembered records checked.
            let changed = moved || (event && !partsOnly) || workersChanged
            if changed { spool.forgetSettled() }
            var look = pace.due(now: now, changed: changed, workersChanged: workersChanged)
            if event && partsOnly && !look.full && pace.ownActive { look.splice = true }
            if let reason = spoolGuard.look(safety: look.safety) {
                stopped = reason
                log("\(reason)")
                break
            }
            // This node splices the files it asked for: other nodes' workers publish their parts
            // unseen (no inotify across clients), so it looks at parts/ every half second while
            // it has a request in flight; one listing, whatever the nodes fetching.
            if !look.full, pace.ownActive, now.timeIntervalSince(lastOwnSplice) >= 0.5 { look.splice = true }
            if look.full || look.splice { lastOwnSplice = now }
            if look.revoke {
                let revoked = spool.revokeExpiredClaims()
                metrics?.revoked(revoked.count)
                for claim in revoked { log("revoked claim \(claim) (its holder is gone or its lease expired); the range goes back to ready") }
            }
            if look.full {
                spool.beginPass()  // one listing of requests/ for the whole pass
                requestLog.look(spool: spool, log: log)
                planner.planRequests()
                // While every active request is another serving node's, their parts are that
                // node's to splice: no listing of parts/ on each change (in a herd, every node's
                // pass on every generation move). Orphans wait for the quarter-lease look below.
                // The orphan look is also made here once a quarter lease has passed without any
                // splice.
                let inFlight = spool.activeRequests()
                if inFlight.isEmpty || !inFlight.allSatisfy({ spool.servedElsewhere($0) }) || pace.orphanSpliceDue(now: now) {
                    splicer.spliceAll(leaving: leaves)
                    pace.spliced(now: now)
                }
                requestLog.look(spool: spool, log: log)
                let active = spool.activeRequests()
                pace.busy = !active.isEmpty
                pace.ownActive = active.contains { $0.node == settings.node }
                spool.endPass()
            } else if look.splice {
                // This node's files; parts whose splicer is gone. Requests are settled by the
                // full pass, here once something was spliced, and every quarter lease while this
                // node has requests of its own in flight (another process may have finished one).
                splicer.spliceAll(leaving: leaves, settlingAlways: look.revoke && pace.ownActive)
                pace.spliced(now: now)
            }
            if look.repair {
                // A range is made ready again only when a second look finds it lost too: 2 s
                // after a repair that found suspects.
                pace.repaired(now: now, suspects: planner.repairLostJobs())
                spool.sweepTemp()
                for node in spool.retireDeadSupervisors() {
                    log("node \(node)'s speech-fetchd has not been heard from for three leases; its record is retired")
                }
            }
            cacheCap?.look(now: now, finished: requestLog.takeFinished())
            if pace.beatDue(now: now) { spool.refreshHeartbeat(recheckPath: look.safety) }
            // Idle worker slots look once this pass has planned and revoked: one listing of
            // `jobs/ready` per change, not one before the pass and one after.
            if moved { slotWord?.wakeAll() }
            // The next look at the generation comes a poll after this one, however long the
            // pass took: the pass's time is not added to a waiter's wait.
            let nap = max(0.05, pace.sleep(poll: poll, now: Date()) - Date().timeIntervalSince(now))
            event = watcher?.wait(seconds: nap) ?? { usleep(UInt32(nap * 1_000_000)); return false }()
            partsOnly = event && watcher?.takeChanged() == [partsFolder]
        }
        if let stopped = stopped as? SupervisorError { log("\(stopped)") }
        drain()
        if let stopped { throw stopped }
    }

    /// Since when no worker runs while one could not be started (nil: one runs, or none was
    /// refused yet), and the last reason.
    private var workerless: (since: Date, reason: String)?

    /// Why no worker could be kept running for `seconds` (nil while one runs, or not for that long).
    private func workerlessFor(seconds: Double) -> String? {
        guard let workerless, workers.isEmpty, Date().timeIntervalSince(workerless.since) >= seconds else { return nil }
        return workerless.reason
    }

    /// Notes why a worker could not be started or kept.
    private func refusedWorker(_ reason: String) {
        if workers.isEmpty && workerless == nil { workerless = (Date(), reason) }
        workerless?.reason = reason
    }

    /// Starts workers where some died; true when any died or started (a pass looks at once:
    /// a dead worker's claims go back to ready). Stops starting once `shouldStop` (a SIGTERM
    /// during a start of many workers is not left waiting for all of them).
    private func keepWorkers(shouldStop: () -> Bool) -> Bool {
        let before = workers.count
        workers.removeAll { !$0.isRunning }
        if !workers.isEmpty { workerless = nil }
        var changed = workers.count != before
        while workers.count < workerCount && !shouldStop() {
            // A worker that dies at once is throttled, not respawned in a loop.
            let deaths = deathLock.withLock {
                recentDeaths.removeAll { Date().timeIntervalSince($0) > 10 }
                return recentDeaths.count
            }
            if deaths > workerCount * 3 {
                refusedWorker("every worker started died at once: \(deaths) in 10 s; the log says why")
                return changed
            }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: workerCommand[0])
            process.arguments = Array(workerCommand.dropFirst())
            // One worker process of the node looks for endgame races on a timer (the others only
            // when woken): the looks list claims and temp parts, and their cost must not grow with
            // the processes of every node while a download runs.
            var env = environment
            let lookerAlive = workers.contains { $0.processIdentifier == endgameLooker }
            env[Worker.endgameLookerVariable] = lookerAlive ? "0" : "1"
            process.environment = env
            do {
                try process.run()
                if !lookerAlive { endgameLooker = process.processIdentifier }
                workers.append(process)
                workerless = nil
                changed = true
                let died = { @Sendable [weak self] (_: Process) -> Void in self?.noteDeath() }
                process.terminationHandler = died
            } catch {
                // Foundation's spawn errors are NSErrors: their errno says it in words.
                let ns = error as NSError
                let reason = ns.domain == NSPOSIXErrorDomain ? String(cString: strerror(Int32(ns.code))) + " (errno \(ns.code))" : "\(error)"
                log("cannot start a worker (\(workerCommand[0])): \(reason)")
                refusedWorker(reason)
                return changed
            }
        }
        return changed
    }

    private let deathLock = NSLock()
    private func noteDeath() { deathLock.withLock { recentDeaths.append(Date()) } }

    private func drain() {
        log("draining \(counted(workers.count, "worker"))")
        for w in workers where w.isRunning { kill(w.processIdentifier, SIGTERM) }
        let deadline = Date().addingTimeInterval(10)
        while workers.contains(where: \.isRunning) && Date() < deadline { usleep(20_000) }
        for w in workers where w.isRunning { kill(w.processIdentifier, SIGKILL) }
        spool.revokeExpiredClaims()
        ReadyView(spool: spool)?.remove()
        NodeNamesView(spool: spool)?.remove()
        LiveProgress(spool: spool)?.removeIfUnused()
        spool.retireSupervisor()
        while cacheCap?.isRunning == true && Date() < deadline.addingTimeInterval(20) { usleep(20_000) }
        RequestTargets.retract(in: spool)
        EndpointPolicy.retract(in: spool)
        log("stopped")
    }
}

/// When a supervisor looks at what (docs/protocol.md, "Change-driven wake-ups"):
/// - a full pass (plan, splice, settle) when something changed: the generation moved, a local
///   event, a worker died or started; else once per `safety` interval (an idle node);
/// - revocation when a worker of this node died, on the safety pass, and while requests are
///   active (busy) every lease/4 (not on every generation move: another node's change expires no
///   claim);
/// - while busy: orphan splicing every lease/4, the repair of
///   lost jobs and the temp sweep every 10 s (2 s after a repair that found suspects); idle, those
///   two every fourth safety pass;
/// - the heartbeat (a touch) every lease/4.
struct SupervisorPace {
    let lease: Double
    /// An idle node's full look: revocation of dead nodes' claims, orphans, sweeping.
    let safety: Double
    var busy = true
    /// A request of this node is active: its supervisor splices it.
    var ownActive = false
    private var lastFull = Date.distantPast
    private var lastRevoke = Date.distantPast
    private var lastRepair = Date.distantPast
    private var repairInterval = 10.0
    private var lastBeat = Date()
    /// The last listing of parts/ (a full pass's or a splice look's).
    private var lastSplice = Date.distantPast

    init(lease: Double) {
        self.lease = lease
        safety = max(30, lease)
    }

    struct Look {
        var full = false
        var revoke = false
        var splice = false
        var repair = false
        /// The full pass is the idle node's periodic one, not a reaction to a change.
        var safety = false
    }

    func safetyDue(now: Date) -> Bool { now.timeIntervalSince(lastFull) >= safety }

    /// `workersChanged`: a worker of this node died or started (its claims are judged at once).
    mutating func due(now: Date, changed: Bool, workersChanged: Bool = false) -> Look {
        var look = Look()
        let quarter = LeaseJudge.heartbeatInterval(lease: lease)
        look.safety = now.timeIntervalSince(lastFull) >= safety
        look.full = changed || look.safety
        // Revocation (a listing of the claims, a look at this node's) when one of this node's
        // workers died, on the safety pass, and every quarter lease while busy (a silent worker,
        // a gone node): not on every move of the generation, which expires no claim (in a herd,
        // every node's pass on every other node's change).
        look.revoke = workersChanged || look.safety || (busy && now.timeIntervalSince(lastRevoke) >= quarter)
        look.splice = !look.full && look.revoke
        // Idle, the repair of lost jobs and the temp sweep (a listing each) run with every fourth
        // safety pass: what they find (a planner that died half way, a dead writer's temp file)
        // waits without harm, and an idle node lists as little as it can.
        look.repair = now.timeIntervalSince(lastRepair) >= (busy ? repairInterval : 4 * safety)
        if look.full { lastFull = now }
        if look.revoke { lastRevoke = now }
        return look
    }

    /// Orphans (parts whose plan's node is this one or gone while every active request is
    /// another serving node's) are looked for at least every quarter lease while busy.
    func orphanSpliceDue(now: Date) -> Bool { busy && now.timeIntervalSince(lastSplice) >= LeaseJudge.heartbeatInterval(lease: lease) }

    mutating func spliced(now: Date) { lastSplice = now }

    mutating func repaired(now: Date, suspects: Bool) {
        lastRepair = now
        repairInterval = suspects ? 2 : 10
    }

    mutating func beatDue(now: Date) -> Bool {
        guard now.timeIntervalSince(lastBeat) >= LeaseJudge.heartbeatInterval(lease: lease) else { return false }
        lastBeat = now
        return true
    }

    /// How long the loop may sleep: the poll (one stat of the generation when it wakes).
    func sleep(poll: Double, now: Date) -> Double { ownActive ? min(poll, 0.5) : poll }
}

/// One log line per request: accepted, then done (bytes and time) or failed (the reason); or
/// refused (where it points, or its Hub), never accepted.
struct RequestLog {
    private var open: [String: (since: Date, bytes: Int64)] = [:]
    private var settled: Set<String> = []
    /// Requests of this node that finished since `takeFinished`.
    private var finished = 0
    var metrics: DaemonMetrics?

    mutating func takeFinished() -> Int {
        defer { finished = 0 }
        return finished
    }

    mutating func look(spool: Spool, log: (String) -> Void) {
        for request in spool.requests() where !settled.contains(request.id) {
            let state = spool.state(of: request.id)
            let bytes = request.files.reduce(Int64(0)) { $0 + $1.size }
            guard let seen = open[request.id] else {
                if state == .active, let refusal = spool.targetRefusal(of: request) {
                    // Refused, never accepted: the planner fails it with this reason.
                    log("refused \(request.repo) @ \(request.commit.prefix(12)) (request \(request.id), node \(request.node)): \(refusal)")
                    metrics?.settled(failed: .refused)
                    settled.insert(request.id)
                } else if state == .active {
                    open[request.id] = (Date(), bytes)
                    log("accepted \(request.repo) @ \(request.commit.prefix(12)): \(counted(request.files.count, "file")), "
                        + "\(ByteFormat.mebibytes(bytes)) into \(request.modelDir) (request \(request.id), node \(request.node))")
                } else {
                    settled.insert(request.id)  // settled before this daemon saw it
                }
                continue
            }
            let seconds = String(format: "%.1f", Date().timeIntervalSince(seen.since))
            switch state {
            case .active: continue
            case .done:
                log("done \(request.repo) (request \(request.id)): \(ByteFormat.mebibytes(seen.bytes)) in \(seconds) s")
                if request.node == spool.owner.node { finished += 1 }
            case .failed(let failure): log("failed \(request.repo) (request \(request.id)) after \(seconds) s: \(failure.reason)")
            }
            if case .failed(let failure) = state {
                metrics?.settled(failed: failure.kind)
            } else {
                metrics?.settled(failed: nil, files: request.files.count, bytes: seen.bytes)
            }
            open[request.id] = nil
            settled.insert(request.id)
        }
    }
}
