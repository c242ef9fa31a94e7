// RequestWait - `speech wait`: block until the latest request for a repo in a cache base is final
// or failed, or answer from the cache when nothing is requested.
import Daemon
import Foundation
import HubTypes
import ModelCache

extension HuggingFaceDownloader {
    /// `speech wait`: blocks until the latest request for `repo` in this cache base is final
    /// (returns the path of the folder its files are in), failed (throws its reason) or the
    /// timeout passes. With no request it answers at once from the cache.
    @discardableResult
    public func wait(repo rawRepo: String, cacheBaseDir: URL? = nil, timeout: Double? = nil,
                     isCancelled: @escaping @Sendable () -> Bool = { false }) throws -> String {
        let repo = try RepoID(rawRepo)
        let base = cacheBaseDir ?? defaultCacheBase
        try checkLocations(cacheDir: nil, cacheBaseDir: cacheBaseDir, forWriting: false)
        let directory = ModelDirectory(CacheLocation.modelDirectory(base: base, repo: repo))
        if let handoff = handoff(base: base), let request = handoff.latestRequest(for: repo.description) {
            try handoff.waitFor(request, timeout: timeout, isCancelled: isCancelled)
            return request.directory.filesURL.path
        }
        let missing = directory.missingOffline(.all, repo: repo.description)
        guard missing.isEmpty else {
            throw CacheError.cacheMiss(repo: repo.description, directory: directory.path, missing: missing,
                                       reason: "nothing is requested for \(repo) in \(base.path)")
        }
        return directory.path
    }
}
