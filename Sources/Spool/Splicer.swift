// Splicer - puts completed parts into their staging files and finishes files and requests.
// Any process may run it (supervisor, worker, waiter, a new caller): the staging lock makes
// one of them the writer of a file at a time; the rest leave the parts for it.
import Foundation
import HubClient
import ModelCache

public enum SpliceOutcome: Sendable, Equatable {
    case nothing
    /// Another live process holds the file's staging lock.
    case busy
    case progressed
    case finalized
    case failed(String)
}

public struct Splicer: Sendable {
    public let spool: Spool

    public init(spool: Spool) { self.spool = spool }

    /// Splices every file that has parts waiting, then settles requests. Returns what happened per file key.
    @discardableResult
    public func spliceAll() -> [String: SpliceOutcome] {
        var outcomes: [String: SpliceOutcome] = [:]
        for (key, indices) in spool.partsByFile() {
            guard let plan = spool.plannedFile(key) else {
                // A part whose plan is gone belongs to a file that is final or failed.
                for index in indices { unlink(spool.partPath(key: key, index: index)) }
                continue
            }
            outcomes[key] = splice(plan)
        }
        settleRequests()
        return outcomes
    }

    /// Splices the parts of one file, records them in its sidecar, and finalizes it when whole.
    /// With `salvagingTempParts` (a caller about to fetch the file itself), the unfinished part of
    /// a range whose worker is gone is copied in too and recorded as that range's `partial`, so
    /// the embedded engine asks only for its tail (the part stays for a worker to adopt).
    @discardableResult
    public func splice(_ plan: PlannedFile, salvagingTempParts: Bool = false) -> SpliceOutcome {
        let directory = plan.directory
        if directory.isComplete(plan.file) {
            spool.dropPlan(plan)
            return .finalized
        }
        guard let lock = StagingLock.acquire(plan.file.path, in: directory, owner: spool.owner, lease: spool.lease) else {
            return .busy
        }
        // Refreshed on a timer: a long splice (hashing a big prefix) never looks abandoned.
        let held = HeldLocks(lease: spool.lease)
        held.add(lock)
        defer { held.releaseAll() }
        do {
            let staging = try StagingFile(file: plan.file, in: directory, commit: plan.commit, rangeSize: plan.rangeSize)
            let done = staging.doneRanges
            var spliced: [String] = []
            for index in 0..<plan.rangeCount where spool.hasPart(plan, index) {
                let part = spool.partPath(plan, index)
                if done.contains(index) { spliced.append(part); continue }
                do {
                    try staging.splice(partAt: part, index: index)
                    staging.markDone(index)
                    spliced.append(part)
                } catch CacheError.sizeMismatch {
                    // A part of the wrong size is dropped and its range fetched again.
                    unlink(part)
                    spool.addJobs(plan, indices: [index])
                }
                // Other errors (disk full, I/O) keep the part for a later splice.
            }
            var salvaged = false
            if salvagingTempParts {
                let finished = staging.doneRanges
                for index in 0..<plan.rangeCount where !finished.contains(index) && !spool.hasPart(plan, index) {
                    let r = staging.range(index)
                    guard let gone = spool.goneParts(of: plan.jobName(index), rangeLength: r.end - r.start + 1),
                          gone.size > staging.partialBytes(index),
                          let copied = try? staging.splicePrefix(partAt: gone.path, index: index), copied > 0 else { continue }
                    staging.recordPartial(index, bytes: copied)
                    salvaged = true
                }
            }
            if salvaged && spliced.isEmpty { try staging.persist() }  // synced before recorded
            if !spliced.isEmpty {
                try staging.advanceHash()
                try staging.persist()  // durable before the parts go
                for part in spliced { unlink(part) }
            }
            guard staging.isFullyDone else { return spliced.isEmpty ? .nothing : .progressed }
            do {
                try staging.finalize()
            } catch {
                spool.recordFailure(plan.key, reason: "\(error)")
                spool.dropPlan(plan)
                return .failed("\(error)")
            }
            spool.dropPlan(plan)
            return .finalized
        } catch {
            return .failed("\(error)")
        }
    }

    /// Marks requests done when every file is final, failed when one of their files failed.
    public func settleRequests() {
        for request in spool.requests() where spool.state(of: request.id) == .active {
            let directory = request.directory
            var complete = true
            for file in request.files where !directory.isComplete(file) {
                complete = false
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                if let reason = spool.failure(of: key) {
                    spool.markFailed(request.id, reason: "\(file.path): \(reason)")
                    break
                }
            }
            if complete {
                // A detached request has no caller left to record the ref: the settler does.
                try? directory.recordRevision(request.revision)
                spool.markDone(request.id)
            }
        }
    }
}

/// Turns requests into range jobs (what a supervisor does on every pass).
public struct Planner: Sendable {
    public let spool: Spool
    public let rangeSize: Int64
    /// Plan only requests made on this node (`speech-fetchd --own-requests`).
    public let ownRequestsOnly: Bool

    public init(spool: Spool, rangeSize: Int64, ownRequestsOnly: Bool = false) {
        self.spool = spool
        self.rangeSize = rangeSize
        self.ownRequestsOnly = ownRequestsOnly
    }

    /// Plans every file of every active request that is neither final, planned nor failed.
    public func planRequests() {
        for request in spool.requests() where spool.state(of: request.id) == .active {
            if ownRequestsOnly && request.node != spool.owner.node { continue }
            let directory = request.directory
            for file in request.files where !directory.isComplete(file) {
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                if spool.failure(of: key) != nil || spool.plannedFile(key) != nil { continue }
                plan(file, of: request, in: directory)
            }
        }
    }

    private func plan(_ file: RepoFile, of request: SpoolRequest, in directory: ModelDirectory) {
        if file.size == 0 {
            try? directory.placeEmptyFile(file)
            return
        }
        // The staging file and sidecar are made (or validated) under the lock; the ranges the
        // sidecar already lists are not planned again, in the range size it already uses.
        guard let lock = StagingLock.acquire(file.path, in: directory, owner: spool.owner, lease: spool.lease) else { return }
        let held = HeldLocks(lease: spool.lease)
        held.add(lock)
        defer { held.releaseAll() }
        let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
        guard spool.plannedFile(key) == nil, !directory.isComplete(file) else { return }
        let staging: StagingFile
        do {
            staging = try StagingFile(file: file, in: directory, commit: request.commit, rangeSize: rangeSize)
        } catch {
            // Unplannable here (no libcrypto, the disk refuses the staging file): the request
            // fails with the reason instead of leaving its waiters to time out.
            spool.recordFailure(key, reason: "\(error)")
            return
        }
        let planned = PlannedFile(repo: request.repo, modelDir: request.modelDir, commit: request.commit, file: file,
                                  rangeSize: staging.rangeSize, node: request.node, layout: request.layout)
        let done = staging.doneRanges
        try? staging.persist()
        try? spool.plan(planned, pending: (0..<planned.rangeCount).filter { !done.contains($0) })
    }

    /// Recreates jobs that got lost (a planner or splicer that died half way): a range of a
    /// planned file that is not done, not ready, not claimed and has no part.
    public func repairLostJobs() {
        for plan in spool.plannedFiles() {
            let directory = plan.directory
            if directory.isComplete(plan.file) { spool.dropPlan(plan); continue }
            // Look in the order a job moves (ready, claimed, part, done), so a job that moves
            // while we look is seen at a later stage, never missed.
            let ready = Set(spool.readyJobs())
            let candidates = (0..<plan.rangeCount).filter { index in
                let name = plan.jobName(index)
                return !ready.contains(name) && spool.claimant(of: name) == nil && !spool.hasPart(plan, index)
            }
            guard !candidates.isEmpty else { continue }
            let sidecar = StagingFile.sidecarURL(plan.file.path, in: directory)
            let record = SpoolFS.read(sidecar.path).flatMap { try? JSONDecoder().decode(Sidecar.self, from: $0) }
            // A sidecar of another commit or range size says nothing about this plan's ranges.
            let done = record.map { $0.commit == plan.commit && $0.rangeSize == plan.rangeSize ? Set($0.done) : [] } ?? []
            let lost = candidates.filter { !done.contains($0) }
            if !lost.isEmpty { spool.addJobs(plan, indices: lost) }
        }
    }
}
