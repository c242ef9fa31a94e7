// DaemonHost - the download call's side of speech-fetchd: who runs a transfer, and `speech wait`.
// The hand-over itself (requests, waiting, adoption) is the Daemon module's `Handoff`.
import Daemon
import Foundation
import HubTypes
import ModelCache

/// Who runs the transfer of a download call.
public enum TransferHost: Sendable {
    /// The daemon when one serves the cache base, else this process.
    case automatic
    /// Always this process (the embedded engine).
    case embedded
    /// Hand the request to the daemon and return at once, starting a daemon when none runs.
    case detach(daemonExecutable: String)
}

extension HuggingFaceDownloader {
    /// The hand-off to the spool of a cache base (nil when no spool can be made there).
    func handoff(base: URL) -> Handoff? {
        Handoff(base: base, settings: settings, environment: environment)
    }

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
