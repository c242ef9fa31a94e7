// RequestCancel - `speech cancel`: withdraw a repo's requests from the spool. Waiters see the
// request failed as cancelled; the bytes already staged stay for a later call to resume.
import Digest
import Foundation
import HubTypes
import ModelCache
import Spool

/// A request `cancel` withdrew.
public struct CancelledRequest: Sendable {
    public let id: String
    public let repo: String
    public let modelDir: String
    /// Files of it that were not final yet.
    public let unfinished: [String]
}

extension HuggingFaceDownloader {
    /// The reason a cancelled request carries (what its waiters are told).
    public static let cancelledReason = "cancelled by `speech cancel`"

    /// Withdraws every active request for `repo` in a cache base's spool. Parts already fetched
    /// are spliced into their staging files first, so nothing transferred is lost; then the
    /// request is marked failed (its waiters return at once) and the range jobs of files that no
    /// other active request wants are dropped, so the workers move on.
    /// - Returns: the requests withdrawn (empty when none was active).
    public func cancel(repo rawRepo: String, cacheBaseDir: URL? = nil) throws -> [CancelledRequest] {
        let repo = try RepoID(rawRepo)
        try CryptoLibrary.load()  // splicing hashes the staged prefix
        guard let spool = handoff(base: cacheBaseDir ?? defaultCacheBase)?.spool else { return [] }
        let active = spool.requests().filter { spool.state(of: $0.id) == .active }
        let doomed = active.filter { $0.repo == repo.description }
        guard !doomed.isEmpty else { return [] }
        let keep = Set(active.filter { $0.repo != repo.description }.flatMap { request in
            request.files.map { PlannedFile.key(modelDir: request.modelDir, path: $0.path, commit: request.commit) }
        })
        let splicer = Splicer(spool: spool)
        var withdrawn: [CancelledRequest] = []
        for request in doomed {
            let directory = request.directory
            var unfinished: [String] = []
            var plans: [PlannedFile] = []
            for file in request.files where !directory.isComplete(file) {
                unfinished.append(file.path)
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                guard !keep.contains(key), let plan = spool.plannedFile(key) else { continue }
                // Published parts go into the staging file first, while the request is still
                // active (a settled request's leftovers are cleared). The supervisor may be
                // splicing them right now: wait for its staging lock rather than lose them.
                var outcome = splicer.splice(plan)
                let deadline = Date().addingTimeInterval(max(2, spool.lease / 3))
                while case .busy = outcome, Date() < deadline {
                    usleep(20_000)
                    outcome = splicer.splice(plan)
                }
                switch outcome {
                case .busy, .failed: continue  // the plan and its parts stay: nothing is lost
                default: if !directory.isComplete(file) { plans.append(plan) }
                }
            }
            spool.markFailed(request.id, FailureRecord(.cancelled, Self.cancelledReason))  // waiters return; nobody plans it again
            for plan in plans { spool.dropPlan(plan) }  // workers move on
            withdrawn.append(CancelledRequest(id: request.id, repo: request.repo, modelDir: request.modelDir, unfinished: unfinished))
        }
        return withdrawn
    }
}
