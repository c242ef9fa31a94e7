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
            switch spool.lookPlan(key) {
            case .found(let plan):
                outcomes[key] = splice(plan)
            case .absent:
                // A part whose plan is gone belongs to a file that is final or failed.
                for index in indices { unlink(spool.partPath(key: key, index: index)) }
            case .unknown:
                // An unreadable plan is not a missing one: the parts stay for the next pass.
                outcomes[key] = .busy
            }
        }
        settleRequests()
        return outcomes
    }

    /// Splices the parts of one file, records them in its sidecar, and finalizes it when whole.
    @discardableResult
    public func splice(_ plan: PlannedFile) -> SpliceOutcome {
        let directory = ModelDirectory(URL(fileURLWithPath: plan.modelDir))
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
            for index in 0..<plan.rangeCount where spool.hasPart(plan, index) == true {
                let part = spool.partPath(plan, index)
                if done.contains(index) { spliced.append(part); continue }
                do {
                    try staging.splice(partAt: part, index: index)
                    staging.markDone(index)
                    spliced.append(part)
                    // The hash follows the contiguous prefix part by part, while later ranges still
                    // arrive: a pass that splices a whole file does not read it all back at its end
                    // (slow through a network filesystem's client).
                    try? staging.advanceHash()
                } catch CacheError.sizeMismatch {
                    // A part of the wrong size (read successfully) is dropped and its range fetched again.
                    unlink(part)
                    spool.addJobs(plan, indices: [index])
                } catch {
                    // Other errors (disk full, I/O, a stale handle) keep the part for a later splice.
                }
            }
            if !spliced.isEmpty {
                try staging.advanceHash()
                try staging.persist()  // durable before the parts go
                for part in spliced { unlink(part) }
            }
            guard staging.isFullyDone else { return spliced.isEmpty ? .nothing : .progressed }
            do {
                try staging.finalize()
            } catch let error as CacheError where error.isTransient {
                // Could not look (a stale handle, EIO): the file is not bad; finish it next pass.
                return .failed("\(error)")
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
            let directory = ModelDirectory(URL(fileURLWithPath: request.modelDir))
            var complete = true
            for file in request.files where !directory.isComplete(file) {
                complete = false
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                if let reason = spool.failure(of: key) {
                    spool.markFailed(request.id, reason: "\(file.path): \(reason)")
                    break
                }
            }
            if complete { spool.markDone(request.id) }
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
            let directory = ModelDirectory(URL(fileURLWithPath: request.modelDir))
            for file in request.files where !directory.isComplete(file) {
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                // Planned only when the plan is positively absent (an unreadable one may stand).
                if spool.failure(of: key) != nil || !spool.lookPlan(key).isAbsent { continue }
                plan(file, of: request, in: directory)
            }
        }
    }

    private func plan(_ file: RepoFile, of request: SpoolRequest, in directory: ModelDirectory) {
        if file.size == 0 {
            try? AtomicFile.write(Data(), to: directory.finalURL(file.path))
            return
        }
        // The staging file and sidecar are made (or validated) under the lock; the ranges the
        // sidecar already lists are not planned again, in the range size it already uses.
        guard let lock = StagingLock.acquire(file.path, in: directory, owner: spool.owner, lease: spool.lease) else { return }
        let held = HeldLocks(lease: spool.lease)
        held.add(lock)
        defer { held.releaseAll() }
        let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
        guard spool.lookPlan(key).isAbsent, !directory.isComplete(file) else { return }
        let staging: StagingFile
        do {
            staging = try StagingFile(file: file, in: directory, commit: request.commit, rangeSize: rangeSize)
        } catch let error as CacheError where error.isTransient {
            return  // the sidecar or staging file could not be read now: the next pass plans it
        } catch {
            // Unplannable here (no libcrypto, the disk refuses the staging file): the request
            // fails with the reason instead of leaving its waiters to time out.
            spool.recordFailure(key, reason: "\(error)")
            return
        }
        let planned = PlannedFile(repo: request.repo, modelDir: request.modelDir, commit: request.commit, file: file,
                                  rangeSize: staging.rangeSize, node: request.node)
        let done = staging.doneRanges
        try? staging.persist()
        try? spool.plan(planned, pending: (0..<planned.rangeCount).filter { !done.contains($0) })
    }

    /// Recreates jobs that got lost (a planner or splicer that died half way): a range of a
    /// planned file that is not done, not ready, not claimed and has no part.
    public func repairLostJobs() {
        for plan in spool.plannedFiles() {
            let directory = ModelDirectory(URL(fileURLWithPath: plan.modelDir))
            if directory.isComplete(plan.file) { spool.dropPlan(plan); continue }
            // Look in the order a job moves (ready, claimed, part, done), so a job that moves
            // while we look is seen at a later stage, never missed. A range is lost only when
            // every look succeeded and found nothing: an unreadable directory, part or sidecar
            // may hold it.
            guard let readyNames = SpoolFS.listing(spool.readyDir) else { continue }
            let ready = Set(readyNames)
            let unready = (0..<plan.rangeCount).filter { !ready.contains(plan.jobName($0)) }
            guard !unready.isEmpty, let claimed = SpoolFS.listing(spool.claimedDir) else { continue }
            let claimedJobs = Set(claimed.compactMap { $0.split(separator: "@").first.map(String.init) })
            let candidates = unready.filter { !claimedJobs.contains(plan.jobName($0)) && spool.hasPart(plan, $0) == false }
            guard !candidates.isEmpty else { continue }
            let sidecar = StagingFile.sidecarURL(plan.file.path, in: directory)
            let record: Sidecar?
            switch SpoolFS.look(sidecar.path) {
            case .found(let data): record = try? JSONDecoder().decode(Sidecar.self, from: data)
            case .absent:
                // Finalizing unlinks the sidecar after the rename into place: look again.
                if directory.isComplete(plan.file) { spool.dropPlan(plan); continue }
                record = nil
            case .unknown: continue
            }
            // A sidecar of another commit or range size says nothing about this plan's ranges.
            let done = record.map { $0.commit == plan.commit && $0.rangeSize == plan.rangeSize ? Set($0.done) : [] } ?? []
            let lost = candidates.filter { !done.contains($0) }
            if !lost.isEmpty { spool.addJobs(plan, indices: lost) }
        }
    }
}
