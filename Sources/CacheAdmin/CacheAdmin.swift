// CacheAdmin - `speech cache`: list, verify, remove and clean the models of one cache base, and
// adopt models from a huggingface_hub cache. Every operation leaves alone whatever is in flight:
// a file whose staging lock a live process holds, or a model the spool has an active request or
// a plan for (docs/protocol.md).
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool
import Transfer

/// Why a cache operation could not be done.
public enum CacheAdminError: Error, Sendable, CustomStringConvertible {
    /// No model directory for the repo in this cache base.
    case notCached(repo: String, directory: String)
    /// A transfer is working on the model (what holds it is listed).
    case inFlight(repo: String, directory: String, reasons: [String])
    /// No huggingface_hub cache (`<HF_HOME>/hub`) where one was expected.
    case noHFCache(path: String)
    case io(path: String, operation: String, errno: Int32)

    public var description: String {
        switch self {
        case .notCached(let repo, let directory):
            return "\(repo) is not in the cache (no \(directory))"
        case .inFlight(let repo, let directory, let reasons):
            return "\(repo) is in flight in \(directory): \(reasons.joined(separator: "; ")); "
                + "wait for it (`speech wait \(repo)`) or stop the transfer, then try again"
        case .noHFCache(let path):
            return "no huggingface_hub cache at \(path) (set --hf-home, HF_HUB_CACHE or HF_HOME)"
        case .io(let path, let operation, let code):
            return "cannot \(operation) \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// The cache base's administration. Blocking calls; safe to use while downloads and
/// `speech-fetchd` run on the same base (their work in flight is never touched).
public struct CacheAdmin: Sendable {
    /// The cache base (`<base>/models/<org>/<name>/`, `<base>/spool/`).
    public let base: URL
    /// This machine's name in locks and claims (`SPEECH_FETCH_NODE`, default the host name).
    public let node: String
    /// Seconds after which another node's lock that was not refreshed is stale (`SPEECH_FETCH_LEASE_SECONDS`).
    public let lease: Double
    let environment: [String: String]
    /// Repo id → the file selections a caller may have fetched it with (the model catalog's
    /// entries): such a repo is complete when one of them is all there.
    let knownSelections: [String: [FileSelection]]

    /// An administrator for `cacheBase`, or the default base (`QWEN3_CACHE_DIR`, else
    /// `${XDG_CACHE_HOME:-~/.cache}/qwen3-speech`).
    public init(cacheBase: URL? = nil, environment: [String: String] = ProcessInfo.processInfo.environment,
                knownSelections: [String: [FileSelection]] = [:]) {
        self.environment = environment
        self.knownSelections = knownSelections
        base = (cacheBase ?? CacheLocation.defaultBase(environment)).standardizedFileURL
        let settings = DownloadSettings.fromEnvironment(environment)
        node = settings.node
        lease = settings.lease
    }

    var modelsRoot: String { CacheLocation.modelsRoot(base: base).path }

    /// The base's spool folder (`<base>/spool`), whether or not it exists yet.
    public var spoolDirectory: String { SpoolLayout(base: base.path).root }
    var owner: LockOwner { LockOwner(node: node) }

    func directory(for repo: RepoID) -> ModelDirectory {
        ModelDirectory(CacheLocation.modelDirectory(base: base, repo: repo))
    }

    /// Every `<base>/models/<org>/<name>/` whose names form a valid repo id, sorted.
    func modelDirectories() -> [(repo: RepoID, directory: ModelDirectory)] {
        var result: [(RepoID, ModelDirectory)] = []
        for org in FileTree.names(modelsRoot) where FileTree.isDirectory(modelsRoot + "/" + org) {
            for name in FileTree.names(modelsRoot + "/" + org) where FileTree.isDirectory("\(modelsRoot)/\(org)/\(name)") {
                guard let repo = try? RepoID("\(org)/\(name)") else { continue }
                result.append((repo, directory(for: repo)))
            }
        }
        return result
    }

    /// The base's spool when it has one; never creates it.
    func existingSpool() -> Spool? {
        Spool.existing(base: base, node: node, lease: lease)
    }

    /// True when a live `speech-fetchd` serves this base.
    public var daemonServesBase: Bool { !(existingSpool()?.liveSupervisors().isEmpty ?? true) }

    /// The live `speech-fetchd` of another user serving this base, when this process may not use
    /// its spool (`ForeignDaemon`): the user it runs as, and its pid when it runs on this node.
    public var otherUsersDaemon: (user: String, pid: Int32?)? {
        ForeignDaemon.serving(base: base, node: node, lease: lease).map { ($0.user, $0.pid) }
    }
}

/// What the spool is doing, read once and grouped by (canonical) model directory.
struct SpoolView {
    let spool: Spool?
    private(set) var activeRequests: [String: [SpoolRequest]] = [:]
    private(set) var plans: [String: [PlannedFile]] = [:]

    init(_ spool: Spool?) {
        self.spool = spool
        guard let spool else { return }
        for request in spool.requests() where spool.state(of: request.id) == .active {
            activeRequests[FileTree.canonical(request.modelDir), default: []].append(request)
        }
        for plan in spool.plannedFiles() {
            plans[FileTree.canonical(plan.modelDir), default: []].append(plan)
        }
    }
}

/// What is in flight in one model directory.
struct InFlight {
    /// Repo path → holder (`node@pid`) of a live staging lock.
    var lockedPaths: [String: String] = [:]
    /// Repo paths the spool has a plan for.
    var plannedPaths: Set<String> = []
    /// Repo paths of active requests.
    var requestedPaths: Set<String> = []
    var activeRequests: [SpoolRequest] = []
    /// What huggingface_hub is writing into a repo folder of its cache: a held `.locks/` lock, a
    /// live `blobs/*.incomplete` (paths). Any of them holds every revision of the repo.
    var hubWrites: [String] = []

    var isEmpty: Bool { lockedPaths.isEmpty && plannedPaths.isEmpty && activeRequests.isEmpty && hubWrites.isEmpty }

    /// A transfer is writing this file, or will: locked, planned, or asked for.
    func touches(_ path: String) -> Bool {
        lockedPaths[path] != nil || plannedPaths.contains(path) || requestedPaths.contains(path)
    }

    /// `touches` for the file a hashed staging name (`ModelLayout.isHashed`) belongs to, whose
    /// repo path cannot be read back from the name: matched by encoding the wanted paths.
    func touches(stagingName: String) -> Bool {
        guard ModelLayout.isHashed(stagingName) else { return false }
        return plannedPaths.union(requestedPaths).contains { ModelLayout.stagingName($0) == stagingName }
    }

    /// A process is writing this file right now, or the daemon has split it into jobs.
    func isBusy(_ path: String) -> Bool { lockedPaths[path] != nil || plannedPaths.contains(path) }

    var reasons: [String] {
        var out = lockedPaths.sorted { $0.key < $1.key }.map { "\($0.key) is being written (staging lock held by \($0.value))" }
        for request in activeRequests {
            out.append("spool request \(request.id) (\(counted(request.files.count, "file"))) is active")
        }
        let unrequested = plannedPaths.subtracting(requestedPaths).subtracting(lockedPaths.keys)
        if !unrequested.isEmpty { out.append("the spool has plans for \(unrequested.sorted().joined(separator: ", "))") }
        for path in hubWrites {
            out.append(path.hasSuffix(".lock") ? "huggingface_hub holds its lock \(path)" : "huggingface_hub is writing \(path)")
        }
        return out
    }
}

extension CacheAdmin {
    /// Live staging locks in the directory's `.incomplete/`, by repo path.
    func liveLocks(_ directory: ModelDirectory) -> [String: String] {
        let staging = directory.stagingDirectory.path
        var result: [String: String] = [:]
        for entry in FileTree.names(staging) {
            guard let repoPath = ModelLayout.lockedRepoPath(entry) else { continue }
            let path = directory.stagingPath(entry)
            guard !StagingLock.isStale(path, localNode: node, lease: lease, probe: staging) else { continue }
            let holder = FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) } ?? "?"
            result[repoPath] = holder
        }
        return result
    }

    func inFlight(_ directory: ModelDirectory, _ view: SpoolView) -> InFlight {
        var state = InFlight()
        state.lockedPaths = liveLocks(directory)
        let key = FileTree.canonical(directory.path)
        state.activeRequests = view.activeRequests[key] ?? []
        state.requestedPaths = Set(state.activeRequests.flatMap { $0.files.map(\.path) })
        state.plannedPaths = Set((view.plans[key] ?? []).map(\.file.path))
        if directory.hubCommit != nil { state.hubWrites = hubWrites(directory.hubFolder) }
        return state
    }

    /// huggingface_hub's writes into a repo folder: each held blob lock, and each
    /// `blobs/*.incomplete` modified within the lease on the file server's clock (huggingface_hub
    /// writes it steadily while it downloads; flock is local to one machine, so on a shared
    /// filesystem only the age shows another node's write). One that cannot be judged counts.
    func hubWrites(_ folder: HubRepoFolder) -> [String] {
        var writes = folder.heldBlobLocks()
        let incomplete = folder.incompleteBlobs()
        guard !incomplete.isEmpty else { return writes }
        let round = LeaseJudge(localNode: node, lease: lease, probe: folder.path).round()
        writes += incomplete.filter { round.age(SharedFS.mtime($0)) != .expired }
        return writes
    }
}
