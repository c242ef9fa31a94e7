// Spool - the filesystem job queue one cache base shares between processes and nodes.
// docs/protocol.md ("The spool") is the specification; every operation is one of its steps. This
// file holds the spool's state; its operations are split by job: SpoolRequests, SpoolQuarantine,
// SpoolJobs (plans, ready jobs, claims), SpoolParts (parts and adoption), SpoolEndgame,
// SpoolSweep (revocation and sweeping), SpoolSupervisors (records and heartbeats),
// SpoolGeneration, and ClaimPolicy (the pure rules of fair share and racing).
import Foundation
import ModelCache
import SharedFiles

public enum RequestState: Sendable, Equatable {
    case active
    case done
    case failed(FailureRecord)
}

/// A range job claimed by this process: `claimed/<job>@<node>@<pid>`, its mtime the lease. An
/// endgame duplicate's path is its marker `jobs/endgame/<job>`, and `duplicateOf` names the claim
/// it races.
public struct ClaimedJob: Sendable {
    public let name: String
    public let path: String
    public let plan: PlannedFile
    public let index: Int
    public var duplicateOf: String? = nil
    /// The job came back to ready after a claim (revoked, given back, repaired: `Spool.markGivenBack`),
    /// so a gone claimant may have left a part in `tmp/` to adopt; a fresh job has none, and its
    /// claimant does not list `tmp/` for one. True where it is not known (a duplicate).
    public var givenBack = true
}

/// A claimed range another node is far behind on, which an idle slot may duplicate.
public struct LaggingClaim: Sendable, Equatable {
    public let job: String
    public let claimPath: String
    public let node: String
    /// Bytes of the range the claimant has not written yet (from its temp part's size).
    public let remaining: Int64
}

public final class Spool: @unchecked Sendable {
    /// Every name in this spool. Callers act through the operations below; a folder's path is for
    /// watching it or naming it in a message.
    public let layout: SpoolLayout
    /// `<base>/spool`.
    public var root: String { layout.root }
    public let owner: LockOwner
    /// Seconds after which a claim or lock that was not refreshed may be revoked.
    public let lease: Double
    /// Seconds a network filesystem's client may serve a renamed-over file's old content (its
    /// entry and attribute caches; 0 where every reader sees every rename at once). A splicer
    /// writes a sidecar only this long after it took the file's lock, so that its last look at
    /// the sidecar (`StagingFile.persist`) reads what the previous holder wrote.
    public let settle: Double
    /// The one judge of every lease in this spool: claims, heartbeats, temp files, parts
    /// (docs/protocol.md, "Liveness").
    public let judge: LeaseJudge
    /// Remember which requests are settled (done or failed) instead of reading their markers on
    /// every look, until `forgetSettled()` (a supervisor calls it when the generation moves: a
    /// request asked again is active again, and asking bumps the generation).
    public var remembersSettled: Bool {
        get { lock.withLock { remembering } }
        set { lock.withLock { remembering = newValue; settledIDs.removeAll() } }
    }
    // The state below is this process's memory of the spool, shared by the operations' files and
    // touched only under `lock`.
    var counter = 0
    let lock = NSLock()
    var remembering = false
    var settledIDs = Set<String>()
    /// Plans read, with the inode they were read from (`lookPlan`).
    var planCache: [String: (plan: PlannedFile, identity: FileIdentity)] = [:]
    /// The pid this node's supervisor record named at the last look (`anySupervisorServes`).
    var localSupervisor: (pid: Int32, started: UInt64?)?
    var lastRetireLook = Date.distantPast
    /// When `sweepTemp` last judged other nodes' temp files (`foreignSweepInterval`).
    var lastForeignSweep = Date.distantPast
    /// When each other node was last seen serving (`supervisorServes`).
    var servingSeen: [String: Date] = [:]
    /// Requests parsed once: a request's record never changes under its id (the id is a digest
    /// of its directory, commit and files). Entries whose id leaves `requests/` are dropped.
    var parsedRequests: [String: (request: SpoolRequest, identity: FileIdentity)] = [:]
    /// The next `requests()` looks up each remembered record's inode, size and mtime (one lstat
    /// each): a record replaced under its id (removed and written again, or planted; a new file
    /// may get the inode number of the one just removed) is read afresh.
    var revalidate = false
    /// The listing of `requests/` within one supervisor pass (`beginPass`): a pass plans,
    /// splices, settles and logs, and each of those looks at the requests.
    var passRequestIDs: [String]?
    /// Each request's state as first looked at in the pass (two lookups at the file server
    /// each): the pass's logging, planning, settling and its look at what is active share them.
    /// A marker this process publishes or clears is looked at again.
    var passStates: [String: RequestState] = [:]
    /// Per request, the index of its first file not final at the last settle (`settleResume`).
    var settleResumes: [String: Int] = [:]
    var inPass = false
    /// The generation file and this node's supervisor record, held open (`HeldFile`).
    lazy var heldGeneration = HeldFile(path: layout.generation)
    lazy var heldHeartbeat = HeldFile(path: layout.supervisor(owner.node))
    /// When each claim seen by `laggingClaim` last grew, in this process.
    let growth = ClaimGrowth()

    /// "Now" on the file server's clock, when not read from the probe (tests: a clock that
    /// cannot be read).
    let clock: (@Sendable () -> Double?)?

    /// Opens (creating when needed) the spool of the cache base `base`. `clock` replaces the
    /// clock probe (tests).
    public convenience init(base: URL, node: String, lease: Double = 30, settle: Double = 0,
                            clock: (@Sendable () -> Double?)? = nil) throws {
        try self.init(base: base, node: node, lease: lease, settleOnceMade: { _ in settle }, clock: clock)
    }

    /// Opens the spool like `init(base:node:lease:settle:clock:)`, its `settle` decided from the
    /// spool's root once its folders exist (the filesystem it is on): the folders are made and
    /// checked once, not once to look at the filesystem and again to open it.
    public init(base: URL, node: String, lease: Double = 30, settleOnceMade: (String) -> Double,
                clock: (@Sendable () -> Double?)? = nil) throws {
        self.clock = clock
        let layout = SpoolLayout(base: base.standardizedFileURL.path)
        self.layout = layout
        owner = LockOwner(node: node)
        self.lease = lease
        judge = LeaseJudge(localNode: node, lease: lease, probe: layout.clockProbe)
        try SpoolTrust.prepare(layout)  // 0700 (0770 for a shared group); refused if others can write it
        settle = settleOnceMade(layout.root)
    }

    /// Where this spool's records may send the Hub's bytes (a daemon's processes set it); nil: not checked.
    public var targets: RequestTargets? {
        get { lock.withLock { allowedTargets } }
        set { lock.withLock { allowedTargets = newValue } }
    }
    var allowedTargets: RequestTargets?

    /// The Hubs this spool's requests may be fetched from (a daemon's processes set it); nil: not checked.
    public var endpoints: EndpointPolicy? {
        get { lock.withLock { allowedEndpoints } }
        set { lock.withLock { allowedEndpoints = newValue } }
    }
    var allowedEndpoints: EndpointPolicy?

    /// The spool of `base` when it has one (never created here).
    public static func existing(base: URL, node: String, lease: Double) -> Spool? {
        var st = stat()
        guard lstat(SpoolLayout(base: base.standardizedFileURL.path).root, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return try? Spool(base: base, node: node, lease: lease)
    }

    /// A fresh unique name in `tmp/`: `<hint>@<node>@<pid>@<counter>`, unique across nodes.
    public func tempPath(_ hint: String) -> String {
        layout.temp(hint, owner: owner, n: nextCount())
    }

    /// "Now" on the spool filesystem's clock; nil when the probe could not be touched or read
    /// (no lease may be judged then).
    public func serverNow() -> Double? { clock.map { $0() } ?? SpoolFS.serverNow(probe: layout.clockProbe) }

    /// A round of lease judgements: the file server's clock is read once, when a judgement first
    /// needs it (never on a pass that judges nothing).
    public func leaseRound() -> LeaseRound {
        judge.round(now: clock ?? { [probe = layout.clockProbe] in SpoolFS.serverNow(probe: probe) })
    }

    /// Starts a supervisor pass: `requests()` lists `requests/` once until `endPass()`.
    public func beginPass() { lock.withLock { inPass = true; passRequestIDs = nil; passStates = [:] } }

    public func endPass() { lock.withLock { inPass = false; passRequestIDs = nil; passStates = [:] } }

    func nextCount() -> Int { lock.withLock { counter += 1; return counter } }
}
