// HuggingFaceDownloader - the one entry point: a repo id in, verified files in a cache directory out.
import ByteUnits
import Daemon
import Foundation
import HubClient
import HubTypes
import ModelCache
import SharedFiles
import Spool
import Synchronization
import Transfer

/// Downloads model repositories into the cache. Shared by every model; safe to use from many tasks.
public final class HuggingFaceDownloader: Sendable {
    public let settings: DownloadSettings
    let environment: [String: String]
    /// A token for this downloader's own Hub requests, instead of `HF_TOKEN` (`speech download
    /// --token`). It stays in this process: a daemon started or served keeps its own credential.
    let token: String?
    private let madeClient = Mutex<HubClient?>(nil)

    /// The Hub client (`HF_ENDPOINT`, `HF_TOKEN`), made at its first use: a call the cache
    /// answers offline never parses the endpoint or reads the token file.
    public var client: HubClient {
        madeClient.withLock { made in
            if let made { return made }
            let client = makeClient(retry: settings.retry, stallTimeout: settings.stallTimeout)
            made = client
            return client
        }
    }

    /// A downloader configured from the environment (`HF_ENDPOINT`, `HF_TOKEN`, `HF_DOWNLOAD_*`);
    /// `token`, when given, replaces the environment's token for this downloader's requests.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment, settings: DownloadSettings? = nil,
                token: String? = nil) {
        let given = settings
        let settings = (settings ?? DownloadSettings.fromEnvironment(environment)).normalized()
        self.environment = environment
        self.settings = settings
        self.token = token
        invalidSetting = given == nil ? InvalidSetting.first(in: environment) : nil
    }

    /// A variable of the environment the settings came from that cannot be read
    /// (`SPEECH_FETCH_MAX_RATE=20MB`): every download and plan fails naming it, as an invalid
    /// flag does, rather than run without it.
    private let invalidSetting: InvalidSetting?

    /// A Hub client for the endpoint of `environment`, with `token` or else the environment's.
    private func makeClient(retry: RetryPolicy, stallTimeout: Double) -> HubClient {
        guard let token else { return HubClient.fromEnvironment(environment, retry: retry, stallTimeout: stallTimeout) }
        return HubClient(endpoint: .fromEnvironment(environment), token: token, retry: retry, stallTimeout: stallTimeout)
    }

    /// The cache base used when a call names neither `cacheDir` nor `cacheBaseDir`.
    public var defaultCacheBase: URL { CacheLocation.defaultBase(environment) }

    /// `HF_HUB_OFFLINE` as a default for `offlineMode`.
    public var offlineByDefault: Bool {
        EnvironmentFlag.isOn("HF_HUB_OFFLINE", in: environment)
    }

    /// The huggingface_hub cache used when a call asks for that layout without naming one:
    /// `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`.
    public var defaultHubCache: URL { HubCache.defaultDirectory(environment) }

    /// Downloads `repo` and returns the model directory (with `huggingFaceCache`, the snapshot folder).
    public func download(repo: String, revision: String = "main", include: [String] = [], exclude: [String] = [],
                         cacheDir: URL? = nil, cacheBaseDir: URL? = nil, huggingFaceCache: URL? = nil,
                         offlineMode: Bool? = nil, forceDownload: Bool = false,
                         progress: (@Sendable (DownloadProgress) -> Void)? = nil) async throws -> URL {
        try await downloadWithResult(repo: repo, revision: revision, include: include, exclude: exclude, cacheDir: cacheDir,
                                     cacheBaseDir: cacheBaseDir, huggingFaceCache: huggingFaceCache,
                                     offlineMode: offlineMode, forceDownload: forceDownload, progress: progress).directory
    }

    /// Downloads `repo` and says what happened. Cancelling the task stops the transfer and keeps
    /// everything staged so far for the next call. Without `progress`, a call handed to
    /// speech-fetchd reads no progress from the shared filesystem while it waits (only its
    /// request's markers).
    public func downloadWithResult(repo: String, revision: String = "main", include: [String] = [], exclude: [String] = [],
                                   cacheDir: URL? = nil, cacheBaseDir: URL? = nil, huggingFaceCache: URL? = nil,
                                   offlineMode: Bool? = nil, forceDownload: Bool = false,
                                   host: TransferHost = .automatic, requestTimeout: Double? = nil,
                                   progress: (@Sendable (DownloadProgress) -> Void)? = nil) async throws -> DownloadResult {
        try await runOffThread { isCancelled in
            try self.downloadBlocking(repo: repo, revision: revision, include: include, exclude: exclude, cacheDir: cacheDir,
                                      cacheBaseDir: cacheBaseDir, huggingFaceCache: huggingFaceCache,
                                      offlineMode: offlineMode, forceDownload: forceDownload, host: host, requestTimeout: requestTimeout,
                                      progress: progress, isCancelled: isCancelled)
        }
    }

    /// The same call, blocking the calling thread (command-line tools, worker processes).
    /// `requestTimeout` bounds the wait for a request handed to speech-fetchd (then
    /// `HandoffError.timedOut`; the transfer goes on).
    /// `huggingFaceCache` writes the repo into that huggingface_hub cache (`models--org--name`,
    /// blobs, snapshots, refs) instead of `<base>/models/org/name`; `cacheBaseDir` then names only
    /// the base whose spool a daemon serves.
    public func downloadBlocking(repo rawRepo: String, revision: String = "main", include: [String] = [],
                                 exclude: [String] = [], cacheDir: URL? = nil, cacheBaseDir: URL? = nil, huggingFaceCache: URL? = nil,
                                 offlineMode: Bool? = nil, forceDownload: Bool = false,
                                 host: TransferHost = .automatic, requestTimeout: Double? = nil,
                                 progress: (@Sendable (DownloadProgress) -> Void)? = nil,
                                 isCancelled: @escaping @Sendable () -> Bool = { false },
                                 notice: @escaping @Sendable (DownloadNotice) -> Void = { _ in }) throws -> DownloadResult {
        if cacheDir != nil && (cacheBaseDir != nil || huggingFaceCache != nil) { throw DownloadError.conflictingDirectories }
        if let invalidSetting { throw invalidSetting }
        let repo = try RepoID(rawRepo)
        try checkLocations(cacheDir: cacheDir, cacheBaseDir: cacheBaseDir, forWriting: false)
        let selection = FileSelection(include, excluding: exclude)
        let directory: ModelDirectory
        let cached: OfflineCheck
        if let huggingFaceCache {
            // The snapshot the revision names on disk (refs/<revision>), if any.
            let folder = HubRepoFolder(hub: huggingFaceCache, repo: repo)
            try HubCache.checkNoPlantedLinks(hub: huggingFaceCache, repo: repo,
                                             commit: folder.commit(forRevision: revision))
            if let commit = folder.commit(forRevision: revision) {
                directory = ModelDirectory(hubRepoFolder: folder.url, commit: commit)
                cached = directory.loadCheck(selection, repo: repo.description)
            } else {
                directory = ModelDirectory(hubRepoFolder: folder.url, commit: "")
                cached = OfflineCheck(missing: selection.literalPaths.isEmpty ? .anyFile : .named(selection.literalPaths),
                                      present: [], commit: nil)
            }
        } else {
            directory = ModelDirectory(cacheDir ?? CacheLocation.modelDirectory(base: cacheBaseDir ?? defaultCacheBase, repo: repo))
            // Its files serve only the revision its manifest recorded (or that commit).
            cached = directory.loadCheck(selection, repo: repo.description, revision: revision)
        }
        if forceDownload, offlineMode ?? offlineByDefault { throw DownloadError.forceDownloadOffline(repo: repo.description) }
        if offlineMode ?? offlineByDefault {
            guard cached.missing.isEmpty else {
                let checked = directory.hubCommit == "" ? directory.path + " (no snapshot for revision \(revision))"
                                                        : directory.filesURL.path
                throw CacheError.cacheMiss(repo: repo.description, directory: checked, missing: cached.missing,
                                           reason: "offline mode")
            }
            HuggingFaceDownloader.reportComplete(cached.present, in: directory, progress: progress)
            var result = DownloadResult(directory: directory.filesURL, files: cached.present, commit: cached.commit, fetched: [], warning: nil)
            // A glob that matches no file is a warning offline as online (as hf), never a miss.
            result.unmatchedPatterns = cached.unmatched.map {
                UnmatchedPattern(pattern: $0, nearPaths: FileSelection.nearest(to: $0, among: cached.present, limit: 3))
            }
            return result
        }

        // Resolution always asks the Hub. When the cache already satisfies the call, one attempt is
        // enough to learn the Hub is unreachable: no waiting through the retry ladder.
        let satisfied = cached.missing.isEmpty && !forceDownload
        let resolver = satisfied ? makeClient(retry: RetryPolicy(attempts: 1), stallTimeout: min(settings.stallTimeout, 30))
                                 : client
        let snapshot: RepoSnapshot
        do {
            snapshot = try resolver.snapshot(of: repo, revision: revision)
        } catch let error as HubError where error.isTransport {
            if satisfied {
                HuggingFaceDownloader.reportComplete(cached.present, in: directory, progress: progress)
                return DownloadResult(directory: directory.filesURL, files: cached.present, commit: nil,
                                      fetched: [], warning: "the Hub could not be reached (\(error)); using the complete copy in \(directory.filesURL.path)")
            }
            throw DownloadError.hubUnreachable(repo: repo.description, directory: directory.path,
                                               missing: cached.missing,
                                               cause: "\(error)")
        }
        // Everything already current: served as it is, whether or not the cache can be written
        // (a read-only mount serves online calls as it serves offline ones).
        if !forceDownload, var served = try servedFromCache(snapshot, repo: repo, selection: selection,
                                                           directory: directory.atCommit(snapshot.commit)) {
            directory.sweepDeadLocks(localNode: settings.node, lease: settings.lease)
            served.unmatchedPatterns = HuggingFaceDownloader.unmatched(selection, in: snapshot.files)
            HuggingFaceDownloader.reportComplete(served.files, in: directory.atCommit(snapshot.commit), progress: progress)
            return served
        }
        // A base another user's daemon serves is that user's to write (docs/protocol.md, "Trust").
        let spoolBase = cacheBaseDir ?? defaultCacheBase
        if huggingFaceCache == nil, directory.path.hasPrefix(spoolBase.standardizedFileURL.path + "/"),
           let foreign = ForeignDaemon.serving(base: spoolBase, node: settings.node, lease: settings.lease) {
            throw DownloadError.servedByAnotherUser(repo: repo.description, base: spoolBase.path, user: foreign.user, pid: foreign.pid)
        }
        try checkLocations(cacheDir: cacheDir, cacheBaseDir: cacheBaseDir, forWriting: true)
        if let huggingFaceCache {
            try HubCache.checkNoPlantedLinks(hub: huggingFaceCache, repo: repo, commit: snapshot.commit)
            HubCache.tag(huggingFaceCache)
        }
        var result = try fetch(snapshot, repo: repo, selection: selection, into: directory.atCommit(snapshot.commit),
                               spoolBase: spoolBase, force: forceDownload,
                               host: host, requestTimeout: requestTimeout, progress: progress, isCancelled: isCancelled, notice: notice)
        result.unmatchedPatterns = HuggingFaceDownloader.unmatched(selection, in: snapshot.files)
        return result
    }

    /// The one progress event of a call the cache answers whole: every file done, fraction 1.0,
    /// so a progress bar that only listens to the callback ends full, as after a transfer.
    static func reportComplete(_ paths: [String], in directory: ModelDirectory,
                               progress: (@Sendable (DownloadProgress) -> Void)?) {
        guard let progress else { return }
        let bytes = paths.reduce(Int64(0)) { sum, path in
            var info = stat()
            return sum + (stat(directory.finalURL(path).path, &info) == 0 ? Int64(info.st_size) : 0)
        }
        progress(DownloadProgress(completedBytes: bytes, totalBytes: bytes, filesDone: paths.count, filesTotal: paths.count))
    }

    /// What a download call would fetch (`speech download --dry-run`): resolves the revision and
    /// lists the tree, applies the selection and the shard indexes already on disk, and writes
    /// nothing. A shard index not yet in the cache is listed with every shard the selection keeps.
    public func plan(repo rawRepo: String, revision: String = "main", include: [String] = [], exclude: [String] = [],
                     cacheDir: URL? = nil, cacheBaseDir: URL? = nil) throws -> DownloadPlan {
        if cacheDir != nil && cacheBaseDir != nil { throw DownloadError.conflictingDirectories }
        if let invalidSetting { throw invalidSetting }
        let repo = try RepoID(rawRepo)
        let directory = ModelDirectory(cacheDir ?? CacheLocation.modelDirectory(base: cacheBaseDir ?? defaultCacheBase, repo: repo))
        let snapshot = try client.snapshot(of: repo, revision: revision)
        let previous = directory.readManifest()
        let selected = try FilePlan.select(snapshot.files, FileSelection(include, excluding: exclude), repo: repo.description)
        let indexes = selected.filter { ShardIndex.isIndexPath($0.path) && isCurrent($0, in: directory, previous: previous) }
            .compactMap { try? ShardIndex(contentsOf: directory.finalURL($0.path), path: $0.path) }
        let needed = try FilePlan.applyIndexes(indexes, selected: selected, all: snapshot.files, repo: repo.description)
        return DownloadPlan(directory: directory.url, commit: snapshot.commit,
                            files: needed.map { DownloadPlan.Entry(path: $0.path, size: $0.size,
                                                                   cached: isCurrent($0, in: directory, previous: previous)) })
    }

    /// Globs of the selection that match no file of the listing, with the paths nearest each.
    static func unmatched(_ selection: FileSelection, in files: [RepoFile]) -> [UnmatchedPattern] {
        let paths = files.map(\.path)
        return selection.patterns.filter { FileSelection.isPattern($0) }.compactMap { pattern in
            paths.contains { FileSelection.glob(pattern, matches: $0) } ? nil
                : UnmatchedPattern(pattern: pattern, nearPaths: FileSelection.nearest(to: pattern, among: paths, limit: 3))
        }
    }

    /// `force`: every needed file is fetched again in this process (no hand-over, no adopted
    /// blob); the new copy replaces the old one only once it verifies.
    private func fetch(_ snapshot: RepoSnapshot, repo: RepoID, selection: FileSelection, into directory: ModelDirectory,
                       spoolBase: URL, force: Bool = false, host: TransferHost, requestTimeout: Double?,
                       progress: (@Sendable (DownloadProgress) -> Void)?,
                       isCancelled: @escaping @Sendable () -> Bool,
                       notice: @escaping @Sendable (DownloadNotice) -> Void) throws -> DownloadResult {
        let previous = directory.hubCommit == nil ? directory.readManifest() : nil  // a snapshot's pointers name their content
        let selected = try FilePlan.select(snapshot.files, selection, repo: repo.description)
        // The manifest as it stands after this call's write: one already on disk as it would be
        // written is left alone (every node of a job asking at once wrote it, each a create, a
        // sync and a rename at the file server), and so is the same one again after a hand-over.
        let manifest = mergedManifest(snapshot, previous: previous, directory: directory)
        if manifest != previous { try directory.writeManifest(manifest) }
        try directory.writeTreeListing(snapshot)
        let engine = TransferEngine(client: client, settings: settings, xetChunkIndex: XetChunkIndex(base: spoolBase))
        var fetched: [String] = []

        // Shard indexes first: they decide which weight files the call needs.
        let indexFiles = selected.filter { ShardIndex.isIndexPath($0.path) }
        let staleIndexes = force ? indexFiles : indexFiles.filter { !isCurrent($0, in: directory, previous: previous) }
        if !staleIndexes.isEmpty {
            try engine.fetch(staleIndexes, repo: repo, commit: snapshot.commit, into: directory, isCancelled: isCancelled)
            fetched += staleIndexes.map(\.path)
        }
        let indexes = try indexFiles.map { try ShardIndex(contentsOf: directory.finalURL($0.path), path: $0.path) }
        // A huggingface_hub cache keeps a consolidated copy too: huggingface_hub checks a snapshot
        // against its tree listing, as `hf download` fills it.
        let needed = try FilePlan.applyIndexes(indexes, selected: selected, all: snapshot.files, repo: repo.description,
                                               keepUnnamed: directory.hubCommit != nil)

        var missing: [RepoFile]
        if force {
            let fetchedIndexes = Set(staleIndexes.map { PathBytes($0.path) })
            missing = needed.filter { !fetchedIndexes.contains(PathBytes($0.path)) }
        } else {
            missing = needed.filter { !isCurrent($0, in: directory, previous: previous) }
            // A blob huggingface_hub (or an earlier snapshot) already holds is checked and linked, not fetched.
            missing = try missing.filter {
                try !directory.adoptExistingBlob($0, lockWait: settings.lockWait, onWaiting: { notice(.waiting($0)) },
                                                isCancelled: isCancelled)
            }
        }
        if isCancelled() { throw CancellationError() }
        // A capped call keeps its transfer: a daemon's workers fetch at the node's rate, not this call's.
        // A target the daemon would refuse (docs/protocol.md, "Trust": outside its cache base and
        // huggingface_hub caches, and not vouched for by the manifest written above) is fetched here.
        let handoff = force || settings.maxRate != nil ? nil : handoff(base: spoolBase).flatMap {
            $0.accepts(directory, repo: repo.description, commit: snapshot.commit) ? $0 : nil
        }
        // The Hub this call resolved the commit against: a daemon fetches it from there or not at
        // all (docs/protocol.md, "Endpoints"). Its URL only: the token stays in this process.
        let endpoint = client.endpoint.url
        if !missing.isEmpty, let handoff {
            // A file larger than the free disk is refused before it is handed over too (the
            // engine checks the same before it stages anything).
            try DiskSpace.checkRoom(for: missing, in: directory)
            let daemon = handoff.daemonServes
            // A serving daemon that would not fetch from this call's Hub is not handed the call:
            // it is fetched below, in this process (a detached one cannot be: it fails saying why).
            let refusal = daemon ? handoff.endpointRefusal(repo: repo.description, endpoint: endpoint) : nil
            switch host {
            case .detach where refusal != nil:
                throw HandoffError.notServed(reason: refusal ?? "")
            case .automatic where refusal != nil:
                notice(.notHandedOver(reason: refusal ?? ""))
                handoff.adopt(missing, commit: snapshot.commit, directory: directory)
                missing = missing.filter { !directory.isComplete($0) }
            case .detach(let executable):
                let request = SpoolRequest(repo: repo.description, revision: snapshot.revision, commit: snapshot.commit,
                                           modelDir: directory.path, files: needed, node: settings.node,
                                           layout: directory.layout, endpoint: endpoint, xetBridge: !settings.xet)
                try handoff.submit(request)
                let started = daemon ? nil : try handoff.startDaemon(executable: executable, base: spoolBase)
                return DownloadResult(directory: directory.filesURL, files: needed.map(\.path), commit: snapshot.commit,
                                      fetched: [], warning: nil, handedOver: true, startedDaemon: started, requestID: request.id)
            case .automatic where daemon:
                let request = SpoolRequest(repo: repo.description, revision: snapshot.revision, commit: snapshot.commit,
                                           modelDir: directory.path, files: needed, node: settings.node,
                                           layout: directory.layout, endpoint: endpoint, xetBridge: !settings.xet)
                try handoff.submit(request)
                notice(.handedToDaemon(spool: handoff.spool.root))
                do {
                    try handoff.waitFor(request, timeout: requestTimeout, takesOver: true, progress: progress, isCancelled: isCancelled)
                    if manifest != snapshot { try directory.writeManifest(snapshot) }
                    try directory.recordRevision(snapshot.revision)
                    directory.sweepDeadLocks(localNode: settings.node, lease: settings.lease)
                    return DownloadResult(directory: directory.filesURL, files: needed.map(\.path), commit: snapshot.commit,
                                          fetched: missing.map(\.path), warning: nil, handedOver: true)
                } catch HandoffError.noDaemon {
                    // The daemon went away: this process finishes the transfer itself.
                    notice(.daemonGone(spool: handoff.spool.root))
                    handoff.adopt(missing, commit: snapshot.commit, directory: directory)
                    missing = missing.filter { !directory.isComplete($0) }
                }
            default:
                handoff.adopt(missing, commit: snapshot.commit, directory: directory)
                missing = missing.filter { !directory.isComplete($0) }
            }
        }
        let missingPaths = Set(missing.map { PathBytes($0.path) })
        let present = needed.filter { !missingPaths.contains(PathBytes($0.path)) }
        try engine.fetch(missing, alreadyComplete: present, repo: repo, commit: snapshot.commit, into: directory,
                         progress: progress ?? { _ in }, isCancelled: isCancelled)
        handoff?.retirePlans(missing, commit: snapshot.commit, directory: directory)
        fetched += missing.map(\.path)
        try directory.writeManifest(snapshot)
        try directory.recordRevision(snapshot.revision)
        // A lock a killed run left (its file finished, or never staged) guards nothing now.
        directory.sweepDeadLocks(localNode: settings.node, lease: settings.lease)
        return DownloadResult(directory: directory.filesURL, files: needed.map(\.path), commit: snapshot.commit,
                              fetched: fetched, warning: nil)
    }

    /// The call's result when every file it needs is already current in `directory` (shard
    /// indexes on disk decide the shards); nil when anything must be fetched. The manifest,
    /// tree listing and ref are brought up to date where the cache can be written, and their
    /// writes are skipped where it cannot (a read-only cache still serves its files).
    private func servedFromCache(_ snapshot: RepoSnapshot, repo: RepoID, selection: FileSelection,
                                 directory: ModelDirectory) throws -> DownloadResult? {
        let previous = directory.hubCommit == nil ? directory.readManifest() : nil
        let selected = try FilePlan.select(snapshot.files, selection, repo: repo.description)
        let indexFiles = selected.filter { ShardIndex.isIndexPath($0.path) }
        guard indexFiles.allSatisfy({ isCurrent($0, in: directory, previous: previous) }),
              let indexes = try? indexFiles.map({ try ShardIndex(contentsOf: directory.finalURL($0.path), path: $0.path) }) else {
            return nil
        }
        let needed = try FilePlan.applyIndexes(indexes, selected: selected, all: snapshot.files, repo: repo.description,
                                               keepUnnamed: directory.hubCommit != nil)
        guard needed.allSatisfy({ isCurrent($0, in: directory, previous: previous) }) else { return nil }
        try? directory.writeManifest(snapshot)
        try? directory.writeTreeListing(snapshot)
        try? directory.recordRevision(snapshot.revision)
        return DownloadResult(directory: directory.filesURL, files: needed.map(\.path), commit: snapshot.commit,
                              fetched: [], warning: nil)
    }

    /// Checks the directories a call names (or the default base) before anything is written,
    /// so that a file, a dangling link or a read-only mount is an error naming the setting.
    func checkLocations(cacheDir: URL?, cacheBaseDir: URL?, forWriting: Bool) throws {
        if let cacheDir {
            try CacheLocation.checkDirectory(cacheDir, role: "the model directory (cacheDir, --cache-dir)", forWriting: forWriting)
        } else if let cacheBaseDir {
            try CacheLocation.checkDirectory(cacheBaseDir, role: "the cache base (cacheBaseDir, --cache-base)", forWriting: forWriting)
        } else {
            try CacheLocation.checkDirectory(defaultCacheBase, role: "the default cache base (QWEN3_CACHE_DIR, XDG_CACHE_HOME)",
                                             forWriting: forWriting)
        }
    }

    /// A file is current when it is on disk at the right size and, if an earlier call recorded
    /// which content it had, that content is the one this commit lists (no re-hashing).
    private func isCurrent(_ file: RepoFile, in directory: ModelDirectory, previous: RepoSnapshot?) -> Bool {
        guard directory.isComplete(file) else { return false }
        guard let old = previous?.files.first(where: { $0.path.isSamePath(as: file.path) }) else { return true }
        return (old.sha256 ?? old.blobID) == (file.sha256 ?? file.blobID)
    }

    /// The new snapshot's listing, keeping the old record for files on disk that are not yet
    /// replaced, so "current" stays judged against what is actually there.
    private func mergedManifest(_ snapshot: RepoSnapshot, previous: RepoSnapshot?, directory: ModelDirectory) -> RepoSnapshot {
        guard let previous else { return snapshot }
        let old = Dictionary(previous.files.map { (PathBytes($0.path), $0) }, uniquingKeysWith: { a, _ in a })
        let files = snapshot.files.map { file -> RepoFile in
            guard let before = old[PathBytes(file.path)], (before.sha256 ?? before.blobID) != (file.sha256 ?? file.blobID),
                  directory.isComplete(before) else { return file }
            return before
        }
        return RepoSnapshot(repo: snapshot.repo, revision: snapshot.revision, commit: snapshot.commit, files: files)
    }
}
