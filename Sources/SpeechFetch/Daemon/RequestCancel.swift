// RequestCancel - `speech cancel`: withdraw a repo's requests from the spool. Waiters see the
// request failed as cancelled; the bytes already staged stay for a later call to resume.
import Foundation
import HubClient
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
        guard let spool = spool(base: cacheBaseDir ?? defaultCacheBase) else { return [] }
        let active = spool.requests().filter { spool.state(of: $0.id) == .active }
        let doomed = active.filter { $0.repo == repo.description }
        guard !doomed.isEmpty else { return [] }
        let keep = Set(active.filter { $0.repo != repo.description }.flatMap { request in
            request.files.map { PlannedFile.key(modelDir: request.modelDir, path: $0.path, commit: request.commit) }
        })
        let splicer = Splicer(spool: spool)
        var withdrawn: [CancelledRequest] = []
        for request in doomed {
            spool.markFailed(request.id, reason: Self.cancelledReason)  // first: nobody plans it again
            let directory = ModelDirectory(URL(fileURLWithPath: request.modelDir))
            var unfinished: [String] = []
            for file in request.files where !directory.isComplete(file) {
                unfinished.append(file.path)
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                guard !keep.contains(key), let plan = spool.plannedFile(key) else { continue }
                splicer.splice(plan)  // published parts into the staging file: kept for the next call
                if !directory.isComplete(file) { spool.dropPlan(plan) }
            }
            withdrawn.append(CancelledRequest(id: request.id, repo: request.repo, modelDir: request.modelDir, unfinished: unfinished))
        }
        return withdrawn
    }
}
