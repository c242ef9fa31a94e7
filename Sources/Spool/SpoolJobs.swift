// SpoolJobs - a file's plan and its range jobs: planned once under its key, made ready, claimed
// by rename, refreshed, given back, and dropped once the file is final or failed
// (docs/protocol.md, "The spool").
import Foundation
import ModelCache
import SharedFiles

extension Spool {
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
                        if planCache.count >= Spool.plansRemembered { planCache.removeAll() }
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

    /// Plans a process keeps parsed (a few hundred bytes each): more than a repo's files, so a
    /// look at every plan of a ten-thousand-file download (the repair of lost jobs) is a stat
    /// each, not a read each.
    static let plansRemembered = 32_768

    static func decodePlan(_ data: Data, key: String) -> PlannedFile? {
        guard let plan = try? JSONDecoder().decode(PlannedFile.self, from: data), plan.key == key, plan.isConsistent
        else { return nil }
        return plan
    }

    public func plannedFiles() -> [PlannedFile] {
        (SharedFS.names(layout.path(.plans)) ?? []).compactMap(SpoolLayout.recordID).compactMap { plannedFile($0) }
    }

    /// Splits a file into ready jobs for `pending` ranges, then publishes the plan. Jobs are
    /// created with O_EXCL under deterministic names, so two planners create each job once;
    /// the plan is published last, so a planner that dies half way leaves a file others re-plan.
    /// `claimed`: a listing of `jobs/claimed` the caller made before it found the plan absent (a
    /// pass over many files lists once); nil lists here.
    public func plan(_ file: PlannedFile, pending: [Int], claimed: Set<String>?? = .none) throws {
        // One look at the claims for every job: none of this key can be taken while its plan is
        // unpublished (a worker claims only jobs whose plan it read), so a claim of it is one
        // left from an earlier plan, and was there before the caller found the plan absent (one
        // readdir, not one per job: 48 through a GlusterFS client were a third of a second of
        // planning; and one per pass, not one per file: parsing the claims' names for each of ten
        // thousand small files was a seventh of the supervisor's CPU). Unlistable: each job looks
        // on its own.
        addJobs(file, indices: pending, claimed: claimed ?? claimedJobs())
        let temp = tempPath("plan")
        // Not synced (docs/protocol.md, "Steps", plan): everything a plan holds is derived from its
        // request and the sidecar, and one whose bytes a power loss took reads as corrupt, goes to
        // corrupt/ and is planned again; a sync here was one of a small file's three under the daemon.
        try SpoolFS.writeNew(temp, try JSONEncoder().encode(file), durable: false)
        try SpoolFS.publishOnce(temp, as: layout.plan(file.key))
        bumpGeneration()
    }

    /// Makes ranges ready again unless they are claimed or have a part (looked at in the order
    /// a job moves), and only while the file's plan stands (or is about to be published). A
    /// range is made ready only when both are positively absent: an unreadable claim or part
    /// may be there.
    /// `givenBack`: the ranges were lost after a claim (a repair): each job is marked
    /// (`markGivenBack`), so its claimant looks for a part to adopt.
    public func addJobs(_ file: PlannedFile, indices: [Int], claimed: Set<String>? = nil, givenBack: Bool = false) {
        var added = false
        defer { if added && SharedFS.exists(layout.plan(file.key)) == true { bumpGeneration() } }
        for index in indices {
            let name = file.jobName(index)
            let taken = claimed.map { $0.contains(name) } ?? isClaimed(name)
            guard taken == false, hasPart(file, index) == false else { continue }
            // Made in place with O_EXCL: an empty file's name is its content, so it exists whole
            // or not at all, and EEXIST means it is there already (no temp file and link: two
            // calls and a directory entry fewer per job).
            if SpoolFS.createEmpty(layout.ready(name)) == true {
                added = true
                if givenBack { Spool.markGivenBack(layout.ready(name)) }
            }
        }
    }

    public func readyJobs() -> [String] { (SharedFS.names(layout.path(.ready)) ?? []).sorted() }

    /// The ready jobs; nil when they cannot be listed.
    public func lookReadyJobs() -> [String]? { SharedFS.names(layout.path(.ready)) }

    /// Claims a ready job by renaming it to `claimed/<job>@<node>@<pid>`; nil when someone else won.
    /// `plan` is the job's plan when the caller read it already (a scan reads each file's plan
    /// once): it is not read again for every job tried.
    public func claim(_ name: String, plan known: PlannedFile? = nil) -> ClaimedJob? {
        guard let (key, index) = PlannedFile.parseJob(name), let plan = known?.key == key ? known : plannedFile(key) else { return nil }
        if let refusal = targets?.cachedRefusal(plan) {
            // Refused here though planned: recorded, so that the request fails and its waiters
            // hear why, rather than waiting for a claim no worker will make.
            if failure(of: key) == nil { recordFailure(key, FailureRecord(.refused, refusal)) }
            return nil
        }
        guard endpoints?.allows(plan.endpoint) != false else { return nil }
        let path = layout.claim(name, by: owner)
        // Fresh mtime before the rename: a claim is never seen with its planning-time age.
        guard SharedFS.touch(layout.ready(name)), rename(layout.ready(name), path) == 0 else { return nil }
        SharedFS.touch(path)
        // A job that came back after a claim holds a byte (`markGivenBack`); a fresh one is empty.
        // The touch just read the claim's attributes back, so this look is answered from the
        // client's attribute cache. Unreadable: looked for as given back.
        var givenBack = true
        if case .found(let st) = SharedFS.lstat(path) { givenBack = st.st_size > 0 }
        return ClaimedJob(name: name, path: path, plan: plan, index: index, givenBack: givenBack)
    }

    /// Marks a job that goes back to ready after a claim (`claimed/…` before its rename, or a
    /// ready job a repair made): one byte, where a fresh job is empty. Its next claimant looks in
    /// `tmp/` for a part a gone claimant left (adoption); the claimant of a fresh job, nearly every
    /// claim, does not (a listing of `tmp/` per claim, whatever the nodes). The name stays the
    /// job's content; the byte says only "given back".
    static func markGivenBack(_ path: String) {
        _ = SharedFS.retry { truncate(path, 1) }
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

    /// Gives a claim back (the job returns to ready), e.g. when a worker drains. A duplicate just
    /// drops its marker (the claim it raced stands).
    public func unclaim(_ claim: ClaimedJob) {
        if claim.duplicateOf != nil { unlink(claim.path); return }
        Spool.markGivenBack(claim.path)
        if rename(claim.path, layout.ready(claim.name)) == 0 { bumpGeneration() }
    }

    /// Files of at most this many ranges have their jobs, parts and endgame markers dropped by
    /// name (three lookups a range) rather than by listing the three folders.
    static let rangesDroppedByName = 4

    /// Forgets a file once it is final or failed: its ready jobs, its leftover parts, its plan.
    public func dropPlan(_ file: PlannedFile) {
        // What is there is listed (three listings), not looked up range by range: an unlink of a
        // name that is not there is still a lookup at the file server, three per range. A file of
        // a few ranges is looked up by name: a listing costs as much as the folder holds, and
        // dropping each of ten thousand small files' plans must not list the others' jobs and
        // parts every time.
        let prefix = file.key + "."
        for folder in [SpoolLayout.Folder.ready, .parts, .endgame] {
            guard file.rangeCount > Spool.rangesDroppedByName, let names = SharedFS.names(layout.path(folder)) else {
                // A few ranges, or unlistable now: every name the plan can have.
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
