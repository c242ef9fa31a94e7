// CachePrune - the size cap (`speech cache prune --max-size`, `speech-fetchd --max-cache-size`):
// evicts whole models, least recently used first, until the cache fits, and never one that is in
// flight on any node, pinned, or used within the grace period. A model is renamed away into
// `<base>/models/.evicted/` first (one atomic step, looked at again for a racing load). On a
// local disk it is then deleted at once: a reader that had a file open keeps it, so the bytes
// are freed by the pass. On a network or FUSE filesystem a file unlinked under another node's
// reader gives it ESTALE, so there it is deleted only once the grace period has passed
// (docs/cache-and-offline.md, "Size cap"; docs/cluster.md).
import ByteUnits
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool

/// What one prune pass is to do.
public struct PruneOptions: Sendable {
    /// The cap on the models' size on disk, in bytes.
    public var maxSize: Int64
    /// Seconds since its last use during which a model is never evicted, and after which an
    /// evicted model's folder is deleted.
    public var grace: Double
    /// Report what would be evicted; write nothing.
    public var dryRun: Bool
    /// A huggingface_hub cache whose revisions the cap covers too (nil: the native models only).
    public var hubCache: URL?
    /// Whether an evicted folder waits the grace period before it is deleted: nil decides by the
    /// filesystem (it waits on a network or FUSE filesystem, where another node may be reading
    /// it, and is deleted at once on a local disk).
    public var holdEvicted: Bool?

    public static let defaultGrace = 3600.0

    public init(maxSize: Int64, grace: Double = PruneOptions.defaultGrace, dryRun: Bool = false, hubCache: URL? = nil,
                holdEvicted: Bool? = nil) {
        self.maxSize = maxSize
        self.grace = grace
        self.dryRun = dryRun
        self.hubCache = hubCache
        self.holdEvicted = holdEvicted
    }
}

/// One model a prune pass evicted (or, in a dry run, would evict).
public struct EvictedModel: Sendable {
    public let repo: String
    /// The commit, for a revision of a huggingface_hub cache; nil for a native model.
    public let revision: String?
    public let directory: URL
    public let bytes: Int64
    public let lastUse: Date?
    /// Where its bytes wait for the grace period; nil when they were deleted at once (a local disk).
    public var waitsIn: String?
}

/// A model a prune pass had to keep although the cache is over its cap.
public struct KeptModel: Sendable {
    public let repo: String
    public let revision: String?
    public let bytes: Int64
    public let reason: String
}

/// What a prune pass did.
public struct PruneReport: Sendable {
    public var maxSize: Int64 = 0
    /// The models' size on disk before and after the pass.
    public var sizeBefore: Int64 = 0
    public var sizeAfter: Int64 = 0
    public var evicted: [EvictedModel] = []
    /// Models the pass would have evicted but had to keep, with the reason (pinned, in flight,
    /// used within the grace period, last use unreadable).
    public var kept: [KeptModel] = []
    /// Evicted folders deleted after their grace period.
    public var purged: [CleanedItem] = []
    /// huggingface_hub blobs no revision points to, removed (or, in a dry run, to be removed).
    public var orphans: [CleanedItem] = []
    /// The grace period of the pass, in seconds (what waiting evicted folders wait).
    public var grace: Double = 0
    public var dryRun = false
    public var overCap: Bool { sizeAfter > maxSize }

    /// `org/name`, or `org/name@<commit, 12 digits> (huggingface_hub)` for a revision of that cache.
    public static func name(_ repo: String, _ revision: String?) -> String {
        revision.map { "\(repo)@\($0.prefix(12)) (huggingface_hub)" } ?? repo
    }
}

/// Sizes of model directories remembered between passes (a daemon's), so a pass walks only the
/// models whose manifest or folder changed since it last looked.
public final class ModelSizes: @unchecked Sendable {
    private let lock = NSLock()
    private var known: [String: (stamp: [Int], bytes: Int64)] = [:]

    public init() {}

    func bytes(_ directory: ModelDirectory) -> Int64 {
        let stamp = Self.stamp(directory.path + "/" + ModelLayout.manifest) + Self.stamp(directory.path)
        if let hit = lock.withLock({ known[directory.path] }), hit.stamp == stamp { return hit.bytes }
        let bytes = FileTree.allocatedBytes(of: DiskScan.regularFiles(under: directory.path, skipTopLevel: ModelLayout.isBookkeeping).map(\.facts))
        lock.withLock { known[directory.path] = (stamp, bytes) }
        return bytes
    }

    private static func stamp(_ path: String) -> [Int] {
        guard case .found(let st) = SharedFS.lstat(path) else { return [0] }
        return [Int(truncatingIfNeeded: st.st_ino), st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ctim.tv_sec, st.st_ctim.tv_nsec, Int(st.st_size)]
    }
}

extension CacheAdmin {
    /// `<base>/models/.evicted`: evicted model folders wait here for the grace period.
    public var evictedDirectory: String { modelsRoot + "/" + Self.evictedFolder }
    static let evictedFolder = ".evicted"

    /// Evicts least recently used models until the models' size on disk is at most
    /// `options.maxSize`, and deletes evicted folders whose grace period has passed. `sizes`
    /// remembers model sizes between passes (nil: every model is measured).
    public func prune(_ options: PruneOptions, sizes: ModelSizes = ModelSizes()) -> PruneReport {
        var report = PruneReport(maxSize: options.maxSize, dryRun: options.dryRun)
        report.grace = options.grace
        // The grace period is judged on the file server's clock, read at most once per pass and
        // only when a judgement needs it (an evicted folder waiting, or the cache over its cap).
        // Reading it touches a probe, a write: a dry run reads this machine's clock instead.
        let probe = [modelsRoot, options.hubCache?.path, base.path].compactMap { $0 }.first { FileTree.isDirectory($0) } ?? modelsRoot
        let judge = LeaseJudge(localNode: node, lease: options.grace, probe: probe)
        let round = options.dryRun ? judge.round(now: { Date().timeIntervalSince1970 })
            : existingSpool()?.leaseRound() ?? judge.round()
        purgeEvicted(in: evictedDirectory, round, options, &report)
        var units = modelDirectories().map { PruneUnit(repo: $0.repo, directory: $0.directory, bytes: sizes.bytes($0.directory)) }
        var hubBytes: Int64 = 0
        var orphans: [OrphanBlob] = []
        if let hub = options.hubCache {
            let scan = hubRevisions(hub)
            for folder in scan.folders { purgeEvicted(in: folder + "/" + Self.hubEvictedFolder, round, options, &report) }
            units += scan.units
            hubBytes = scan.bytes
            orphans = scan.orphans
        }
        report.sizeBefore = units.filter { $0.revision == nil }.reduce(0) { $0 + $1.bytes } + hubBytes
        report.sizeAfter = report.sizeBefore
        guard report.sizeAfter > options.maxSize else { return report }

        let spool = existingSpool()
        let view = SpoolView(spool)
        // Orphan blobs first: no revision points to them, so nothing loads them.
        removeOrphans(orphans, round, options, &report)
        let pins = Set(pinnedRepos())
        // A use is recorded at most once per `useRecordInterval`, so the last load may be that
        // much newer than its record: the record must be older than both together.
        let protected = options.grace + ModelDirectory.useRecordInterval
        var gone = Set<String>()
        let byUse = units.map { ($0, $0.lastUse()) }.sorted { ($0.1 ?? 0) < ($1.1 ?? 0) }
        for (unit, used) in byUse where report.sizeAfter > options.maxSize {
            func keep(_ reason: String) {
                report.kept.append(KeptModel(repo: unit.repo.description, revision: unit.revision, bytes: unit.bytes, reason: reason))
            }
            if pins.contains(unit.repo.description) { keep("pinned"); continue }
            guard let used else { keep("its last use cannot be read"); continue }
            switch round.age(.found(used), lease: protected) {
            case .live:
                keep(Self.graceReason(age: (round.serverNow ?? used) - used, grace: options.grace))
                continue
            case .unknown:
                keep("the file server's clock cannot be read")
                continue
            case .expired: break
            }
            let flight = inFlight(unit.directory, view)
            guard flight.isEmpty else { keep("in flight: " + flight.reasons.joined(separator: "; ")); continue }
            let keys = [FileTree.canonical(unit.directory.path), unit.directory.path]
            let now = round.serverNow ?? used
            var waitsIn: String?
            if !options.dryRun {
                switch unit.revision == nil ? evict(unit.repo, unit.directory, lastUse: used, now: now)
                                            : evictRevision(unit, lastUse: used, now: now) {
                case .refused(let refusal):
                    keep(refusal)
                    continue
                case .moved(let moved):
                    // A local disk frees the bytes now; elsewhere another node may still be reading.
                    let hold = options.holdEvicted ?? !FilesystemKind.inotifySeesAllWriters(moved)
                    if !hold && FileTree.removeTree(moved) {
                        rmdir((moved as NSString).deletingLastPathComponent)  // the trash, when empty
                    } else {
                        waitsIn = moved
                    }
                }
            }
            if unit.revision == nil { gone.formUnion(keys) }
            report.evicted.append(EvictedModel(repo: unit.repo.description, revision: unit.revision, directory: unit.directory.filesURL,
                                               bytes: unit.bytes, lastUse: Date(timeIntervalSince1970: used), waitsIn: waitsIn))
            report.sizeAfter -= unit.bytes
        }
        if !options.dryRun && !report.evicted.isEmpty, let spool {
            // Settled requests for an evicted model would make `speech wait` answer "ready".
            _ = spool.forgetSettledRequests { gone.contains(FileTree.canonical($0.modelDir)) || gone.contains($0.modelDir) }
        }
        return report
    }

    /// Why a model used within the grace period (plus the hour its use record may lag) is
    /// kept. A use is recorded at most hourly, so when its record is older than the grace
    /// period it is the hourly recording that keeps it, and the reason says so.
    static func graceReason(age: Double, grace: Double) -> String {
        let ago = DurationText.coarse(age)
        if age < grace { return "used \(ago) ago, within the grace period" }
        let window = grace < 1 ? "the last hour" : "the grace period plus an hour"
        return "recorded use \(ago) ago, within \(window) (uses are recorded hourly)"
    }

    /// Renames the model into `.evicted/<now>-<org>--<name>-<pid>-<n>`, then looks again: a
    /// staging lock taken, or a use recorded, in the instant before the rename puts it back.
    private func evict(_ repo: RepoID, _ directory: ModelDirectory, lastUse: Double, now: Double) -> Eviction {
        if mkdir(evictedDirectory, 0o755) != 0 && errno != EEXIST {
            return .refused("cannot create \(evictedDirectory): \(String(cString: strerror(errno)))")
        }
        let moved = "\(evictedDirectory)/\(Int(now))-\(repo.org)--\(repo.name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard SharedFS.retry({ rename(directory.path, moved) }) == 0 else {
            return .refused("cannot move it to \(evictedDirectory): \(String(cString: strerror(errno)))")
        }
        let movedDirectory = ModelDirectory(URL(fileURLWithPath: moved))
        let late = liveLocks(movedDirectory)
        let usedSince = (movedDirectory.lastUse() ?? lastUse) > lastUse
        if !late.isEmpty || usedSince {
            // A load or a transfer that raced the rename wins. Should a fresh download have made
            // the directory again meanwhile, that one stays and the moved copy is deleted later.
            rename(moved, directory.path)
            return .refused(late.isEmpty ? "used while it was being evicted" : "a transfer started while it was being evicted")
        }
        rmdir(directory.url.deletingLastPathComponent().path)  // the org folder, when this was its last model
        return .moved(to: moved)
    }

    /// Deletes the folders in `trash` older than the grace period (by the time in their name, on
    /// the file server's clock); a reader on another node that still had a file open has had that long.
    func purgeEvicted(in trash: String, _ round: LeaseRound, _ options: PruneOptions, _ report: inout PruneReport) {
        let before = report.purged.count
        for name in FileTree.names(trash) {
            guard let stamp = name.split(separator: "-").first.flatMap({ Double($0) }),
                  round.age(.found(stamp), lease: options.grace) == .expired else { continue }
            let path = trash + "/" + name
            let bytes = FileTree.allocatedBytes(path)
            if !options.dryRun { guard FileTree.removeTree(path) else { continue } }
            report.purged.append(CleanedItem(path: path, bytes: bytes, reason: "evicted \(DurationText.coarse((round.serverNow ?? stamp) - stamp)) ago"))
        }
        if !options.dryRun && report.purged.count > before { rmdir(trash) }  // when empty
    }
}

/// What an eviction did: moved the model (or revision) into the trash folder `to`, or refused.
enum Eviction {
    case moved(to: String)
    case refused(String)
}

/// One thing a prune pass may evict: a native model directory, or one revision of a
/// huggingface_hub repo (`directory.hubCommit`), with the bytes evicting it frees.
struct PruneUnit {
    let repo: RepoID
    let directory: ModelDirectory
    let bytes: Int64
    /// A revision's blobs that no other revision of its repo points to (they go with it).
    var ownBlobs: [String] = []
    /// The newest access time of a revision's blobs (huggingface_hub's own loads read them).
    var blobUse: Double?

    var revision: String? { directory.hubCommit }

    func lastUse() -> Double? {
        [directory.lastUse(), blobUse].compactMap { $0 }.max()
    }
}
