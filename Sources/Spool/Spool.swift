// Spool - the filesystem job queue one cache base shares between processes and nodes.
// docs/protocol.md ("The spool") is the specification; every method below is one of its steps.
import Foundation
import ModelCache
import SharedFiles

public enum RequestState: Sendable, Equatable {
    case active
    case done
    case failed(String)
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
    private var counter = 0
    private let lock = NSLock()
    private var remembering = false
    private var settledIDs = Set<String>()
    /// Plans read, with the inode they were read from (`lookPlan`).
    private var planCache: [String: (plan: PlannedFile, identity: FileIdentity)] = [:]
    /// The pid this node's supervisor record named at the last look (`anySupervisorServes`).
    private var localSupervisor: Int32?
    private var lastRetireLook = Date.distantPast
    /// When each other node was last seen serving (`supervisorServes`).
    private var servingSeen: [String: Date] = [:]
    /// Requests parsed once: a request's record never changes under its id (the id is a digest
    /// of its directory, commit and files). Entries whose id leaves `requests/` are dropped.
    private var parsedRequests: [String: (request: SpoolRequest, inode: UInt64)] = [:]
    /// The next `requests()` looks up each remembered record's inode (one lstat each): a record
    /// replaced under its id (removed and written again, or planted) is read afresh.
    private var revalidate = false
    /// The listing of `requests/` within one supervisor pass (`beginPass`): a pass plans,
    /// splices, settles and logs, and each of those looks at the requests.
    private var passRequestIDs: [String]?
    private var inPass = false
    /// The generation file and this node's supervisor record, held open (`HeldFile`).
    private lazy var heldGeneration = HeldFile(path: layout.generation)
    private lazy var heldHeartbeat = HeldFile(path: layout.supervisor(owner.node))

    /// "Now" on the file server's clock, when not read from the probe (tests: a clock that
    /// cannot be read).
    private let clock: (@Sendable () -> Double?)?

    /// Opens (creating when needed) the spool of the cache base `base`. `clock` replaces the
    /// clock probe (tests).
    public init(base: URL, node: String, lease: Double = 30, settle: Double = 0,
                clock: (@Sendable () -> Double?)? = nil) throws {
        self.clock = clock
        layout = SpoolLayout(base: base.standardizedFileURL.path)
        owner = LockOwner(node: node)
        self.lease = lease
        self.settle = settle
        judge = LeaseJudge(localNode: node, lease: lease, probe: layout.clockProbe)
        try SpoolTrust.prepare(layout)  // 0700 (0770 for a shared group); refused if others can write it
    }

    /// Where this spool's records may send the Hub's bytes (a daemon's processes set it); nil: not checked.
    public var targets: RequestTargets? {
        get { lock.withLock { allowedTargets } }
        set { lock.withLock { allowedTargets = newValue } }
    }
    private var allowedTargets: RequestTargets?

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

    // MARK: Generation

    /// Tells every node that the spool changed in a way another node may act on: a touch of
    /// `generation` (docs/protocol.md, "Change-driven wake-ups"). Whoever publishes a request, a
    /// plan, ready jobs, a revocation, or a done, failed or failure marker bumps it; a part does
    /// not (the supervisor of the worker that published it sees it through inotify).
    public func bumpGeneration() {
        let path = layout.generation
        if SharedFS.touch(path) { return }
        guard SharedFS.exists(path) == false else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
        _ = SharedFS.touch(path)
    }

    /// What one look at `generation` says: a node compares it with its last look, and does a
    /// full pass only when it moved. Through a descriptor this spool keeps open: an `fstat`, with
    /// no lookup of the path at the file server (what a supervisor does once per poll). Nil when
    /// it cannot be read. `recheckPath` also
    /// looks the path up, so a generation file that was replaced is followed (the safety pass).
    public func heldGenerationLook(recheckPath: Bool = false) -> SpoolGeneration? {
        if recheckPath && lock.withLock({ heldGeneration }).stillNamesHeldFile() == false { bumpGeneration() }
        if let st = lock.withLock({ heldGeneration }).status() { return SpoolGeneration(st) }
        bumpGeneration()  // creates it when it is not there yet
        return lock.withLock { heldGeneration }.status().map(SpoolGeneration.init)
    }

    /// Starts a supervisor pass: `requests()` lists `requests/` once until `endPass()`.
    public func beginPass() { lock.withLock { inPass = true; passRequestIDs = nil } }

    public func endPass() { lock.withLock { inPass = false; passRequestIDs = nil } }

    private func nextCount() -> Int { lock.withLock { counter += 1; return counter } }

    // MARK: Requests

    /// Writes a request unless the same one exists. Returns false when it was already there.
    /// Failures recorded for its files are cleared: the caller just resolved the repo, so
    /// asking again deserves a fresh attempt.
    @discardableResult
    public func submit(_ request: SpoolRequest) throws -> Bool {
        for file in request.files {
            clearFailure(PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit))
        }
        let target = layout.request(request.id)
        var fresh = try publishRequest(request, at: target)
        if !fresh, case .corrupt(let why) = readRecord(target, decode: { decodeRequest($0, id: request.id) }) {
            // The request under this id is unreadable (truncated, garbage): it would never be
            // planned and every caller would wait on it forever. It goes to corrupt/; ask afresh.
            quarantine(target, reason: why, stillCorrupt: { self.decodeRequest($0, id: request.id) == nil })
            fresh = try publishRequest(request, at: target)
        }
        if !fresh {
            // Asked again: a failure or completion of the earlier round no longer applies, and
            // the request becomes the newest (its mtime) for waiters choosing among a repo's.
            unlink(layout.failedMarker(request.id))
            unlink(layout.doneMarker(request.id))
            SharedFS.touch(target)
        }
        bumpGeneration()
        return fresh
    }

    private func publishRequest(_ request: SpoolRequest, at target: String) throws -> Bool {
        let temp = tempPath("request")
        try SpoolFS.writeNew(temp, try JSONEncoder().encode(request))
        return try SpoolFS.publishOnce(temp, as: target)
    }

    /// A request record, only when it parses and names the id its file is named after.
    private func decodeRequest(_ data: Data, id: String) -> SpoolRequest? {
        guard let request = try? JSONDecoder().decode(SpoolRequest.self, from: data), request.id == id else { return nil }
        return request
    }

    /// Every readable request. One that was read but does not parse goes to `corrupt/` (with a
    /// log line) instead of being skipped on every pass while its callers wait for it.
    public func requests() -> [SpoolRequest] {
        let memo = lock.withLock { passRequestIDs }
        let ids = memo ?? (SharedFS.names(layout.path(.requests)) ?? []).compactMap(SpoolLayout.recordID)
        var (known, check) = lock.withLock {
            if inPass { passRequestIDs = ids }
            parsedRequests = parsedRequests.filter { ids.contains($0.key) }
            let check = revalidate
            revalidate = false
            return (parsedRequests, check)
        }
        if check {
            for (id, entry) in known {
                guard case .found(let st) = SharedFS.lstat(layout.request(id)), UInt64(st.st_ino) == entry.inode else {
                    known[id] = nil
                    lock.withLock { parsedRequests[id] = nil }  // replaced or gone: read afresh
                    continue
                }
            }
        }
        return ids.compactMap { id in
            if let entry = known[id] { return entry.request }
            let path = layout.request(id)
            guard case .found(let st) = SharedFS.lstat(path),
                  let request = record(path, decode: { self.decodeRequest($0, id: id) }) else {
                lock.withLock { parsedRequests[id] = nil }
                return nil
            }
            lock.withLock { parsedRequests[id] = (request, UInt64(st.st_ino)) }
            return request
        }
    }

    /// The requests that are neither done nor failed. With `remembersSettled`, a request found
    /// settled is not looked at again until `forgetSettled()`.
    public func activeRequests() -> [SpoolRequest] {
        let remembered = lock.withLock { remembering ? settledIDs : [] }
        return requests().filter { request in
            guard !remembered.contains(request.id) else { return false }
            guard state(of: request.id) == .active else {
                lock.withLock { if remembering { settledIDs.insert(request.id) } }
                return false
            }
            return true
        }
    }

    /// True when `request` was made on another node whose supervisor serves: that node plans,
    /// splices and settles it (a look at its heartbeat at most once per quarter lease).
    public func servedElsewhere(_ request: SpoolRequest) -> Bool {
        request.node != owner.node && supervisorServes(request.node, round: leaseRound())
    }

    /// Forgets which requests were found settled (the generation moved: one may be asked again),
    /// and has the next look check that each remembered record is still the one parsed.
    public func forgetSettled() {
        lock.withLock {
            settledIDs.removeAll()
            revalidate = true
        }
    }

    /// True while a request's record is in `requests/` (it is gone when moved to `corrupt/`).
    /// False only when the request's file is positively absent (an unreadable one may be there).
    public func hasRequest(_ id: String) -> Bool { SharedFS.exists(layout.request(id)) != false }

    /// When a request was last asked for (its file's mtime), for picking a repo's newest one.
    public func lastAsked(_ id: String) -> Double { SharedFS.mtime(layout.request(id)).value ?? 0 }

    /// Done, failed (with the reason) or active. A failure marker that cannot be read now (a
    /// network filesystem's ESTALE, a rename racing us) is looked at again later: the request
    /// counts as active meanwhile. One that was read but does not parse goes to `corrupt/`, and
    /// the request is judged again from what is on disk (settling marks it done when its files
    /// are final), never reported as failed without a reason.
    public func state(of id: String) -> RequestState {
        let failed = layout.failedMarker(id)
        if SharedFS.exists(failed) == true {
            switch readRecord(failed, decode: Spool.decodeReason) {
            case .record(let reason): return .failed(reason)
            case .corrupt(let why):
                quarantine(failed, reason: why, stillCorrupt: { Spool.decodeReason($0) == nil })
            case .unreadable:
                return .active
            }
        }
        return SharedFS.exists(layout.doneMarker(id)) == true ? .done : .active
    }

    public func markDone(_ id: String) { publishMarker(layout.doneMarker(id), Data()) }

    public func markFailed(_ id: String, reason: String) { publishMarker(layout.failedMarker(id), reasonJSON(reason)) }

    /// Publishes a small marker file once (the first writer wins; later ones are no-ops), then
    /// wakes the local waiters that sleep on the wake word instead of inotify — also when someone
    /// published first (a publisher killed before its bump must not leave them to their pass).
    /// The word is mapped before the marker appears: the inotify waiters the marker wakes (up to
    /// 128) take the CPU, and the word's sleepers must not wait behind them for this process to
    /// open and map a file.
    private func publishMarker(_ target: String, _ data: Data) {
        let temp = tempPath("marker")
        guard (try? SpoolFS.writeNew(temp, data)) != nil else { return }
        let word = wakeWord()
        _ = try? SpoolFS.publishOnce(temp, as: target)
        bumpGeneration()
        word?.wakeAll()
    }

    /// The wake word of this spool (docs/protocol.md), nil when it cannot be mapped.
    public func wakeWord() -> WakeWord? { WakeWord(spoolRoot: layout.root) }

    private func reasonJSON(_ reason: String) -> Data {
        (try? JSONSerialization.data(withJSONObject: ["reason": reason])) ?? Data()
    }

    private static func decodeReason(_ data: Data) -> String? {
        (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["reason"] as? String
    }

    // MARK: Corrupt records

    /// What reading one spool record found. "Unreadable" (absent, or a read that failed: on a
    /// network filesystem ESTALE or EIO mean "look again") is kept apart from "corrupt" (read
    /// whole, and it does not parse): only the second is ever moved to `corrupt/`.
    enum RecordRead<T> {
        case record(T)
        case unreadable
        case corrupt(String)
    }

    func readRecord<T>(_ path: String, decode: (Data) -> T?) -> RecordRead<T> {
        guard let data = SharedFS.read(path).value else { return .unreadable }
        if let value = decode(data) { return .record(value) }
        return .corrupt(data.isEmpty ? "empty" : "\(data.count) bytes that do not parse")
    }

    /// The record at `path`, or nil; a corrupt one is moved to `corrupt/` on the way.
    func record<T>(_ path: String, decode: @escaping (Data) -> T?) -> T? {
        switch readRecord(path, decode: decode) {
        case .record(let value): return value
        case .unreadable: return nil
        case .corrupt(let why):
            quarantine(path, reason: why, stillCorrupt: { decode($0) == nil })
            return nil
        }
    }

    /// Moves an unreadable record to `corrupt/<folder>.<name>.<node>.<pid>.<n>` and says so on
    /// stderr (the daemon's log). Whoever renames first wins; a record that a writer replaced
    /// with a good one between our read and the rename is put back (`stillCorrupt` judges what
    /// was moved). Returns the new path.
    @discardableResult
    public func quarantine(_ path: String, reason: String, stillCorrupt: (Data) -> Bool = { _ in true }) -> String? {
        let target = layout.corrupt(path, owner: owner, n: nextCount())
        try? SpoolError.saying { try FileIO.makeDirectory(layout.path(.corrupt), mode: 0o700) }
        guard rename(path, target) == 0 else { return nil }  // gone already: someone else moved it
        if let moved = SharedFS.read(target).value, !stillCorrupt(moved) {
            link(target, path)  // EEXIST: a newer record is there already, and it wins
            unlink(target)
            return nil
        }
        SharedFS.touch(target)  // its age in corrupt/ counts from now (`speech cache clean`)
        bumpGeneration()  // a record set aside is work for a supervisor (a file to plan again)
        Spool.report("speech-fetch: spool: moved the unreadable record \(path) (\(reason)) to \(target)")
        return target
    }

    /// Records moved to `corrupt/`, oldest first.
    public func corruptRecords() -> [String] {
        (SharedFS.names(layout.path(.corrupt)) ?? []).sorted {
            (SharedFS.mtime(layout.path(.corrupt, $0)).value ?? 0) < (SharedFS.mtime(layout.path(.corrupt, $1)).value ?? 0)
        }
    }

    private static func report(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    // MARK: Plans and jobs

    public func plannedFile(_ key: String) -> PlannedFile? { lookPlan(key).value }

    /// A file's plan: found, positively absent, or unknown (a read that failed; or a record read
    /// whole that is not a plan, which goes to `corrupt/` so the next planner pass plans the file
    /// again from its sidecar).
    public func lookPlan(_ key: String) -> Lookup<PlannedFile> {
        let path = layout.plan(key)
        // A plan is published once under its key (link(2)) and never rewritten: while the name
        // still has the inode, size and mtime read last time, the plan is the one read (a stat,
        // not an open, read and close: workers look at plans at every scan). A file planned anew
        // under the same key is a new inode; a record damaged in place has a new mtime.
        let seen = SharedFS.lstat(path)
        switch seen {
        case .found(let st):
            if let cached = lock.withLock({ planCache[key] }), cached.identity == FileIdentity(st) { return .found(cached.plan) }
        case .absent:
            lock.withLock { planCache[key] = nil }
            return .absent
        case .unknown:
            break
        }
        switch SharedFS.read(path) {
        case .found(let data):
            if let plan = Spool.decodePlan(data, key: key) {
                if case .found(let st) = seen {
                    lock.withLock {
                        if planCache.count >= 256 { planCache.removeAll() }
                        planCache[key] = (plan, FileIdentity(st))
                    }
                }
                return .found(plan)
            }
            quarantine(path, reason: data.isEmpty ? "empty" : "\(data.count) bytes that do not parse",
                       stillCorrupt: { Spool.decodePlan($0, key: key) == nil })
            return .unknown(EINVAL)
        case .absent: return .absent
        case .unknown(let code): return .unknown(code)
        }
    }

    private static func decodePlan(_ data: Data, key: String) -> PlannedFile? {
        guard let plan = try? JSONDecoder().decode(PlannedFile.self, from: data), plan.key == key, plan.isConsistent
        else { return nil }
        return plan
    }

    public func plannedFiles() -> [PlannedFile] {
        (SharedFS.names(layout.path(.plans)) ?? []).compactMap(SpoolLayout.recordID).compactMap { plannedFile($0) }
    }

    /// Splits a file into ready jobs for `pending` ranges, then publishes the plan. Jobs are
    /// created with link(2) under deterministic names, so two planners create each job once;
    /// the plan is published last, so a planner that dies half way leaves a file others re-plan.
    public func plan(_ file: PlannedFile, pending: [Int]) throws {
        // One look at the claims for every job: none of this key can be taken while its plan is
        // unpublished (a worker claims only jobs whose plan it read), so a claim of it is one
        // left from an earlier plan, and is there already (one readdir, not one per job: 48
        // through a GlusterFS client were a third of a second of planning). Unlistable: each
        // job looks on its own.
        addJobs(file, indices: pending, claimed: claimedJobs())
        let temp = tempPath("plan")
        try SpoolFS.writeNew(temp, try JSONEncoder().encode(file))
        try SpoolFS.publishOnce(temp, as: layout.plan(file.key))
        bumpGeneration()
    }

    /// Makes ranges ready again unless they are claimed or have a part (looked at in the order
    /// a job moves), and only while the file's plan stands (or is about to be published). A
    /// range is made ready only when both are positively absent: an unreadable claim or part
    /// may be there.
    public func addJobs(_ file: PlannedFile, indices: [Int], claimed: Set<String>? = nil) {
        var added = false
        defer { if added && SharedFS.exists(layout.plan(file.key)) == true { bumpGeneration() } }
        for index in indices {
            let name = file.jobName(index)
            let taken = claimed.map { $0.contains(name) } ?? isClaimed(name)
            guard taken == false, hasPart(file, index) == false else { continue }
            let temp = tempPath("job")
            guard (try? SpoolFS.writeNew(temp, Data())) != nil else { continue }
            if (try? SpoolFS.publishOnce(temp, as: layout.ready(name))) == true { added = true }
        }
    }

    public func readyJobs() -> [String] { (SharedFS.names(layout.path(.ready)) ?? []).sorted() }

    /// The ready jobs; nil when they cannot be listed.
    public func lookReadyJobs() -> [String]? { SharedFS.names(layout.path(.ready)) }

    /// Claims a ready job by renaming it to `claimed/<job>@<node>@<pid>`; nil when someone else won.
    /// `plan` is the job's plan when the caller read it already (a scan reads each file's plan
    /// once): it is not read again for every job tried.
    public func claim(_ name: String, plan known: PlannedFile? = nil) -> ClaimedJob? {
        guard let (key, index) = PlannedFile.parseJob(name), let plan = known?.key == key ? known : plannedFile(key),
              targets?.cachedRefusal(plan) == nil else { return nil }
        let path = layout.claim(name, by: owner)
        // Fresh mtime before the rename: a claim is never seen with its planning-time age.
        guard SharedFS.touch(layout.ready(name)), rename(layout.ready(name), path) == 0 else { return nil }
        SharedFS.touch(path)
        return ClaimedJob(name: name, path: path, plan: plan, index: index)
    }

    /// Who holds a job's claim, if anyone (nil also when the claims cannot be listed).
    public func claimant(of job: String) -> String? {
        (SharedFS.names(layout.path(.claimed)) ?? []).first { SpoolLayout.claimedJob($0) == job }
    }

    /// Is the job claimed? nil when the claims cannot be listed.
    public func isClaimed(_ job: String) -> Bool? {
        claimedJobs().map { $0.contains(job) }
    }

    /// The jobs claimed now (junk claim names included); nil when the claims cannot be listed.
    public func claimedJobs() -> Set<String>? {
        SharedFS.names(layout.path(.claimed)).map { Set($0.compactMap(SpoolLayout.claimedJob)) }
    }

    /// The claims that name a holder (`<job>@<node>@<pid>`); nil when they cannot be listed.
    public func claims() -> [SpoolLayout.Claim]? {
        SharedFS.names(layout.path(.claimed)).map { $0.compactMap(SpoolLayout.Claim.init) }
    }

    /// Refreshes a claim's lease; false only when the claim is positively gone (revoked). A
    /// touch that fails on a stale handle is tried again at the next refresh.
    @discardableResult
    public func refresh(_ claim: ClaimedJob) -> Bool {
        SharedFS.touch(claim.path) || SharedFS.exists(claim.path) != false
    }

    /// Where a worker writes a part before publishing it.
    public func partTempPath(_ claim: ClaimedJob) -> String { tempPath(SpoolLayout.partTempHint(claim.name)) }

    /// Takes over the part file a gone claimant of `claim`'s job left in `tmp/` (partial-range
    /// resume): the longest such part is renamed to `temp` and the others are removed. Gone
    /// means a dead (or zombie) pid on this node whose part was written since this boot (after a power loss
    /// unsynced bytes may be garbage, so it is dropped), or another node's part untouched for a
    /// lease. Returns the bytes the part holds: the range's first bytes, written in order (0:
    /// nothing to adopt). The final digest check stays the last word on them.
    public func adoptPart(_ claim: ClaimedJob, as temp: String, rangeLength: Int64) -> Int64 {
        guard let best = goneParts(of: claim.name, rangeLength: rangeLength, except: (temp as NSString).lastPathComponent),
              best.size > 0, rename(best.path, temp) == 0 else { return 0 }
        return best.size
    }

    /// The longest unfinished part of `job` in `tmp/` whose writer is gone (as `adoptPart`
    /// judges), if any; the other such parts, and those not to be trusted, are removed.
    public func goneParts(of job: String, rangeLength: Int64, except mine: String = "") -> (path: String, size: Int64)? {
        let round = leaseRound()
        var best: (path: String, size: Int64)?
        for name in SharedFS.names(layout.path(.tmp)) ?? [] where name != mine {
            guard let temp = SpoolLayout.Temp(name), temp.partJob == job else { continue }
            let pid = temp.pid
            let path = layout.path(.tmp, name)
            var st = stat()
            guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            let mtime = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
            // A live writer is never adopted from; an unknown one neither (the clock unread).
            if temp.node == owner.node {
                guard round.liveness(of: path, holder: LockOwner(node: temp.node, pid: pid), localByPid: true) == .expired
                else { continue }
                if mtime < BootIdentity.startTime { unlink(path); continue }
            } else {
                guard round.age(.found(mtime)) == .expired else { continue }
            }
            let size = Int64(st.st_size)
            if size > rangeLength { unlink(path); continue }  // not this range's bytes
            if let kept = best {
                if size <= kept.size { unlink(path); continue }
                unlink(kept.path)
            }
            best = (path, size)
        }
        return best
    }

    /// Publishes a finished, synced part and drops the claim. The first part of a range wins
    /// (link(2)): false when one was there already (an endgame duplicate, or the claimant it
    /// raced, published first), and this one is discarded. A winning duplicate also removes the
    /// claim it raced, so the slower claimant gives the range up at its next refresh.
    @discardableResult
    public func publishPart(_ temp: String, for claim: ClaimedJob) throws -> Bool {
        let won = try SpoolFS.publishOnce(temp, as: layout.part(claim.name))
        unlink(claim.path)
        if won, let raced = claim.duplicateOf { unlink(raced) }
        return won
    }

    // MARK: Endgame

    /// The claim of another node with the most bytes left, when that is more than half its range,
    /// its node holds more claims than this one, no one duplicates it yet, and a duplicate would
    /// end first: by the bytes still to cross each link (`duplicateWouldWin`), or because the
    /// claim has not grown for `stalledAfter` seconds of this process's looks (a stalled holder).
    /// What an idle slot may fetch too once nothing is ready.
    public func laggingClaim(stalledAfter: Double = 2) -> LaggingClaim? { endgameLook(stalledAfter: stalledAfter).lagging }

    /// `laggingClaim`, and whether another node holds claims at all (while one does, an idle slot
    /// looks again after a while: a claim may stall; once none does, it sleeps until woken).
    /// `holders`: the nodes holding claims. With `lookFurther` false (this node is not one of the
    /// few that race: `EndgameLookers`) the look ends at the claims' listing.
    public func endgameLook(stalledAfter: Double = 2, lookFurther: (Set<String>) -> Bool = { _ in true })
        -> (lagging: LaggingClaim?, othersHoldClaims: Bool, mine: Int, holders: Set<String>) {
        guard let claims = self.claims(), !claims.isEmpty else { return (nil, false, 0, []) }
        let holders = Set(claims.map(\.holder.node))
        let others = claims.contains { $0.holder.node != owner.node }
        let held = claims.filter { $0.holder.node == owner.node }.count
        guard others else {
            growth.forget(except: [])
            return (nil, false, held, holders)
        }
        guard lookFurther(holders) else { return (nil, true, held, holders) }
        guard let raced = SharedFS.names(layout.path(.endgame)).map(Set.init),
              let temps = SharedFS.names(layout.path(.tmp)) else { return (nil, true, held, holders) }
        var perNode: [String: Int] = [:]
        for claim in claims { perNode[claim.holder.node, default: 0] += 1 }
        let mine = perNode[owner.node] ?? 0
        // Bytes still to come of each node's ranges in flight: its claims, and this node's
        // duplicates (its temp parts of raced jobs it holds no claim of).
        var inFlight: [String: [Int64]] = [:]
        var lengths: [String: Int64] = [:]
        var candidates: [(claim: SpoolLayout.Claim, length: Int64, remaining: Int64)] = []
        var plans: [String: PlannedFile?] = [:]  // one read per file, not one per claim
        for claim in claims {
            guard let (key, index) = claim.range else { continue }
            if plans[key] == nil { plans[key] = .some(plannedFile(key)) }
            guard let plan = plans[key] ?? nil, index < plan.rangeCount else { continue }
            let range = plan.range(index)
            let length = range.end - range.start + 1
            lengths[claim.job] = length
            let remaining = max(0, length - written(by: claim, temps: temps))
            inFlight[claim.holder.node, default: []].append(remaining)
            candidates.append((claim, length, remaining))
        }
        let myClaims = Set(claims.filter { $0.holder.node == owner.node }.map(\.job))
        for name in temps {
            guard let temp = SpoolLayout.Temp(name), temp.node == owner.node, let job = temp.partJob,
                  raced.contains(job), !myClaims.contains(job), let length = lengths[job],
                  case .found(let st) = SharedFS.lstat(layout.path(.tmp, name)) else { continue }
            inFlight[owner.node, default: []].append(max(0, length - Int64(st.st_size)))
        }
        let now = Date()
        var best: LaggingClaim?
        for (claim, length, remaining) in candidates where claim.holder.node != owner.node && !raced.contains(claim.job) {
            // Stalled only once some of its bytes were seen (a client that cannot see another's
            // writes before close sees every claim at 0).
            let stalled = growth.stalled(claim.name, remaining: remaining, now: now, after: stalledAfter) && remaining < length
            guard (perNode[claim.holder.node] ?? 0) > mine, remaining * 2 > length, remaining > best?.remaining ?? 0 else { continue }
            guard stalled || Spool.duplicateWouldWin(remaining: remaining, length: length,
                                                     holder: inFlight[claim.holder.node] ?? [], mine: inFlight[owner.node] ?? []) else { continue }
            best = LaggingClaim(job: claim.job, claimPath: layout.path(.claimed, claim.name), node: claim.holder.node,
                                remaining: remaining)
        }
        growth.forget(except: Set(claims.map(\.name)))
        return (best, true, held, holders)
    }

    /// Whether a duplicate of a claim with `remaining` of its `length` bytes to come would be
    /// published before its holder's part, every node's link being as fast (each node's link is
    /// what limits it; docs/cluster.md, "Endgame"). A link shares its bytes among its ranges in
    /// flight, so the holder's part is done once `sum(min(r, remaining))` of its ranges' bytes
    /// (`holder`) have crossed its link; the duplicate starts from the range's first byte beside
    /// this node's ranges in flight (`mine`), and is done once `length + sum(min(m, length))` have
    /// crossed this one. It must win by a quarter of a range: a duplicate that ends about when the
    /// holder does only slows this node's own ranges.
    public static func duplicateWouldWin(remaining: Int64, length: Int64, holder: [Int64], mine: [Int64]) -> Bool {
        let theirs = holder.reduce(Int64(0)) { $0 + min($1, remaining) }
        let ours = mine.reduce(length) { $0 + min($1, length) }
        return ours + length / 4 <= theirs
    }

    /// When each claim seen by `laggingClaim` last grew, in this process.
    private let growth = ClaimGrowth()

    /// Bytes a claim's holder has written so far: its temp part (`tmp/part-<job>@<node>@<pid>@n`)
    /// grows as they arrive. 0 when it cannot be seen.
    private func written(by claim: SpoolLayout.Claim, temps: [String]) -> Int64 {
        var written: Int64 = 0
        for name in temps {
            guard let temp = SpoolLayout.Temp(name), temp.partJob == claim.job, temp.node == claim.holder.node,
                  temp.pid == claim.holder.pid else { continue }
            if case .found(let st) = SharedFS.lstat(layout.path(.tmp, name)) { written = max(written, Int64(st.st_size)) }
        }
        return written
    }

    /// Every node's claims, each as the share of its range still to come (1: nothing written
    /// yet), by node; nil when the claims cannot be listed. `rangeLength` gives a job's length
    /// (nil: unknown, counted as a whole range).
    public func claimLoads(rangeLength: (String) -> Int64?) -> [String: [Double]]? {
        guard let claims = self.claims() else { return nil }
        let temps = SharedFS.names(layout.path(.tmp)) ?? []
        var loads: [String: [Double]] = [:]
        for claim in claims {
            var left = 1.0
            if let length = rangeLength(claim.job), length > 0 {
                left = max(0, 1 - Double(written(by: claim, temps: temps)) / Double(length))
            }
            loads[claim.holder.node, default: []].append(left)
        }
        return loads
    }

    /// Whether a slot of `node` may claim one more of `ready` ranges, given every node's claims
    /// (`claimLoads`) and the live nodes (docs/cluster.md, "Size each node's share"):
    /// - its claims are fewer than ceil((ready + claimed) / nodes), its share by count; and
    /// - its outstanding work (the ranges it holds, each by the share still to come) exceeds the
    ///   even share of all outstanding work (ready ranges and every claim's rest) by at most half
    ///   a range once it takes a whole one, or it is the least loaded live node.
    /// The second rule is for the end of a file: a node whose ranges are nearly done takes the
    /// last ones, not one that has just started four, so the nodes finish together.
    public static func mayClaim(node: String, ready: Int, loads: [String: [Double]], liveNodes: Int) -> Bool {
        let nodes = max(1, liveNodes)
        let mine = loads[node] ?? []
        let claimed = loads.values.reduce(0) { $0 + $1.count }
        guard mine.count < max(1, (ready + claimed + nodes - 1) / nodes) else { return false }
        guard nodes > 1 else { return true }
        let others = loads.filter { $0.key != node }.map { $0.value.reduce(0, +) }
        let myLoad = mine.reduce(0, +)
        // A live node without claims is the least loaded (0).
        if myLoad <= (others.count < nodes - 1 ? 0 : others.min() ?? 0) { return true }
        let total = Double(ready) + myLoad + others.reduce(0, +)
        return myLoad + 0.5 <= total / Double(nodes)
    }

    /// Takes the one endgame duplicate of a lagging claim (`jobs/endgame/<job>`, created once with
    /// link(2)); nil when someone else races it already or the claim is gone.
    public func duplicate(_ lagging: LaggingClaim) -> ClaimedJob? {
        guard let (key, index) = PlannedFile.parseJob(lagging.job), let plan = plannedFile(key) else { return nil }
        let marker = layout.endgameMarker(lagging.job)
        let temp = tempPath("endgame")
        guard (try? SpoolFS.writeNew(temp, Data(owner.description.utf8))) != nil,
              (try? SpoolFS.publishOnce(temp, as: marker)) == true else { return nil }
        // The claim may have been published between the look and the marker.
        guard SharedFS.exists(lagging.claimPath) == true, hasPart(plan, index) == false else {
            unlink(marker)
            return nil
        }
        return ClaimedJob(name: lagging.job, path: marker, plan: plan, index: index, duplicateOf: lagging.claimPath)
    }

    /// True when the range a duplicate races was published (by anyone) or its claim is gone:
    /// the duplicate stops.
    public func duplicateIsMoot(_ claim: ClaimedJob) -> Bool {
        guard let raced = claim.duplicateOf else { return false }
        return hasPart(claim.plan, claim.index) == true || SharedFS.exists(raced) == false
    }

    /// Gives a claim back (the job returns to ready), e.g. when a worker drains. A duplicate just
    /// drops its marker (the claim it raced stands).
    public func unclaim(_ claim: ClaimedJob) {
        if claim.duplicateOf != nil { unlink(claim.path); return }
        if rename(claim.path, layout.ready(claim.name)) == 0 { bumpGeneration() }
    }

    /// Is the range's part published? nil when that cannot be read.
    public func hasPart(_ file: PlannedFile, _ index: Int) -> Bool? {
        SharedFS.exists(layout.part(file.jobName(index)))
    }

    /// Completed parts waiting to be spliced, by file key.
    public func partsByFile() -> [String: [Int]] {
        var result: [String: [Int]] = [:]
        for job in (SharedFS.names(layout.path(.parts)) ?? []).compactMap(SpoolLayout.partJob) {
            if let (key, index) = PlannedFile.parseJob(job) { result[key, default: []].append(index) }
        }
        return result
    }

    /// True when parts wait that nobody is about to splice: no supervisor serves the spool, or
    /// a part has waited longer than `seconds` (on the filesystem's clock).
    /// `supervised`: whether a supervisor is alive, when the caller has just looked.
    public func hasOrphanParts(olderThan seconds: Double, supervised: Bool? = nil) -> Bool {
        let parts = (SharedFS.names(layout.path(.parts)) ?? []).compactMap(SpoolLayout.partJob)
        guard !parts.isEmpty else { return false }
        if !(supervised ?? anySupervisorServes()) { return true }
        guard let now = serverNow() else { return false }
        return parts.contains { now - (SharedFS.mtime(layout.part($0)).value ?? now) > seconds }
    }

    /// The published part of a range (what the splicer copies from).
    public func partPath(_ file: PlannedFile, _ index: Int) -> String { layout.part(file.jobName(index)) }

    /// Removes the published parts of a file whose plan is gone (final or failed).
    public func dropParts(key: String, indices: [Int]) {
        for index in indices { unlink(layout.part(PlannedFile.jobName(key: key, index: index))) }
    }

    /// Moves claims of dead local processes, and claims not refreshed within the lease (on the
    /// file server's clock; a live but silent worker too), back to ready. Claims whose part was
    /// published are just dropped.
    /// Returns the revoked job names. Only what was read decides: a claim whose mtime, or the
    /// server's clock, cannot be read is not judged by age; one whose part cannot be looked up
    /// is left for the next pass.
    @discardableResult
    public func revokeExpiredClaims() -> [String] {
        var revoked: [String] = []
        guard let entries = SharedFS.names(layout.path(.claimed)) else { return [] }
        let round = leaseRound()
        // Another node's claims are its own supervisor's to judge while that supervisor lives
        // (it revokes a dead or silent worker of its node): one look at each node's heartbeat,
        // not one at each of its claims, so a pass costs the same whatever the claims in flight.
        var nodeServed: [String: Bool] = [:]
        for entry in entries {
            guard let claim = SpoolLayout.Claim(entry) else { continue }
            let job = claim.job
            let path = layout.path(.claimed, entry)
            let node = claim.holder.node
            if node != owner.node {
                let served = nodeServed[node] ?? supervisorServes(node, round: round)
                nodeServed[node] = served
                if served { continue }
            }
            guard round.liveness(of: path, holder: claim.holder) == .expired else { continue }
            switch SharedFS.exists(layout.part(job)) {
            case true?:
                unlink(path)
            case false?:
                if rename(path, layout.ready(job)) == 0 { revoked.append(job) }
            case nil:
                continue
            }
        }
        // Endgame markers of duplicates that stopped refreshing (their worker died): another
        // idle slot may race the claim then. Looked at only while claims stand (a marker races one).
        if !entries.isEmpty, let markers = SharedFS.names(layout.path(.endgame)) {
            for marker in markers {
                let path = layout.endgameMarker(marker)
                if round.liveness(of: path, holder: nil) == .expired { unlink(path) }
            }
        }
        if !revoked.isEmpty { bumpGeneration() }
        return revoked
    }

    /// A file's unrecoverable failure (404, gated, checksum), recorded by whoever met it.
    public func recordFailure(_ key: String, reason: String) {
        publishMarker(layout.failure(key), reasonJSON(reason))
    }

    /// The recorded failure of a file; a corrupt record goes to `corrupt/` (the file is tried
    /// again, and a new failure can be recorded in its place).
    public func failure(of key: String) -> String? { record(layout.failure(key), decode: Spool.decodeReason) }

    public func clearFailure(_ key: String) { unlink(layout.failure(key)) }

    /// Forgets a file once it is final or failed: its ready jobs, its leftover parts, its plan.
    public func dropPlan(_ file: PlannedFile) {
        // What is there is listed (three listings), not looked up range by range: an unlink of a
        // name that is not there is still a lookup at the file server, three per range.
        let prefix = file.key + "."
        for folder in [SpoolLayout.Folder.ready, .parts, .endgame] {
            guard let names = SharedFS.names(layout.path(folder)) else {
                // Unlistable now: every name the plan can have, as before.
                for index in 0..<file.rangeCount {
                    let job = file.jobName(index)
                    unlink(folder == .parts ? layout.part(job) : layout.path(folder, job))
                }
                continue
            }
            for name in names where name.hasPrefix(prefix) { unlink(layout.path(folder, name)) }
        }
        // Unfinished parts gone workers left for adoption (a live writer's stay: it removes its own).
        for name in SharedFS.names(layout.path(.tmp)) ?? [] {
            guard let temp = SpoolLayout.Temp(name), let job = temp.partJob, job.hasPrefix(file.key + "."),
                  temp.node == owner.node, !LeaseJudge.processRunning(temp.pid) else { continue }
            unlink(layout.path(.tmp, name))
        }
        unlink(layout.plan(file.key))
    }

    /// Removes temp files whose writer is gone: a dead local process at once, a foreign node's
    /// after 36 hours (as maildir sweeps tmp/). Returns how many were removed.
    @discardableResult
    public func sweepTemp() -> Int {
        var removed = 0
        let round = leaseRound()
        let keep = 36 * 3600.0
        for name in SharedFS.names(layout.path(.tmp)) ?? [] {
            guard let temp = SpoolLayout.Temp(name) else { continue }
            let path = layout.path(.tmp, name)
            // A local writer while its pid runs, another node's for 36 hours.
            var stale = round.liveness(of: path, holder: LockOwner(node: temp.node, pid: temp.pid), lease: keep,
                                       localByPid: true) == .expired
            // A dead worker's part waits for the next claimant of its range to adopt it (36 hours
            // at most); whether the job is ready must be read, not guessed.
            if stale, let job = temp.partJob, temp.node == owner.node {
                switch SharedFS.exists(layout.ready(job)) {
                case true?: stale = round.liveness(of: path, holder: nil, lease: keep) == .expired
                case false?: break
                case nil: stale = false
                }
            }
            if stale, unlink(path) == 0 { removed += 1 }
        }
        return removed
    }

    // MARK: Supervisors

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
        if let pid = lock.withLock({ localSupervisor }), LeaseJudge.processRunning(pid) { return true }
        let pid = supervisorPID(of: owner.node)
        lock.withLock { localSupervisor = pid }
        if let pid, LeaseJudge.processRunning(pid) { return true }
        return !liveSupervisors().isEmpty
    }

    /// True unless another node's supervisor is positively gone: its record absent, or its
    /// heartbeat older than the lease (unknown counts as serving: never acted on).
    /// A node seen serving is taken to serve for the next quarter lease without another look
    /// (its heartbeat is a touch every lease/4): a pass over many plans, parts and claims of
    /// many nodes costs one look per node and quarter lease, not one per pass. Gone is never
    /// remembered: it is what lets a caller act.
    public func supervisorServes(_ node: String, round: LeaseRound) -> Bool {
        let now = Date()
        if let seen = lock.withLock({ servingSeen[node] }), now.timeIntervalSince(seen) < max(0.25, lease / 4) { return true }
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

    /// The claims of each node as whole ranges (a listing only): the share by count.
    public func claimCounts() -> [String: [Double]]? {
        guard let claims = self.claims() else { return nil }
        var loads: [String: [Double]] = [:]
        for claim in claims { loads[claim.holder.node, default: []].append(1) }
        return loads
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

/// The bytes still to come of the claims this process looked at, and since when they have not
/// changed: a claim that does not grow between looks for some seconds is stalled.
final class ClaimGrowth: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [String: (remaining: Int64, since: Date)] = [:]

    func stalled(_ claim: String, remaining: Int64, now: Date, after seconds: Double) -> Bool {
        lock.withLock {
            if let last = seen[claim], last.remaining == remaining { return now.timeIntervalSince(last.since) >= seconds }
            seen[claim] = (remaining, now)
            return false
        }
    }

    func forget(except live: Set<String>) {
        lock.withLock { seen = seen.filter { live.contains($0.key) } }
    }
}

/// What tells one version of a file from another without reading it: inode, size and mtime.
struct FileIdentity: Equatable {
    let inode: UInt64
    let size: Int64
    let mtime: timespec

    init(_ st: stat) {
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        mtime = st.st_mtim
    }

    static func == (a: FileIdentity, b: FileIdentity) -> Bool {
        a.inode == b.inode && a.size == b.size && a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec
    }
}
