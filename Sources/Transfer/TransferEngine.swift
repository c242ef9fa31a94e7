// TransferEngine - fetches a set of files into a model directory with libcurl's multi interface.
//
// Large files go as concurrent byte ranges, small ones as single streams, all under one
// concurrency limit for the whole set. Bytes are written to the staging file as they arrive;
// each file's hash advances on its own queue while the transfer runs, and finished ranges are
// recorded in its sidecar as soon as they are synced, so a process killed at any point
// resumes where it stopped. A run's parts live in files named after them: planning and
// locating (TransferPlan), the event loop (TransferLoop), durability (FileDurability),
// progress (ProgressMeter); what an attempt's end means is `RangeAttemptPolicy`'s to say.
import Curl
import Foundation
import HubClient
import HubTypes
import ModelCache
import SharedFiles

public final class TransferEngine: @unchecked Sendable {
    public let client: HubClient
    public let settings: DownloadSettings
    /// The call's bandwidth cap over all its connections (`settings.maxRate`), nil for none.
    let cap: RateCap?

    /// The cache base's index of Xet chunks in final files (docs/xet.md, "Chunk store"): where
    /// a Xet-backed file's chunks may be read instead of fetched; nil for none.
    public let xetChunkIndex: XetChunkIndex?

    /// `cap`: a schedule to charge instead of the call's own `--max-rate` (a daemon's worker
    /// charges its node's, shared with every worker).
    public init(client: HubClient, settings: DownloadSettings, xetChunkIndex: XetChunkIndex? = nil, cap: RateCap? = nil) {
        self.client = client
        self.xetChunkIndex = xetChunkIndex
        self.settings = settings.normalized()
        self.cap = cap ?? settings.maxRate.map { RateCap(bytesPerSecond: $0) }
    }

    /// Fetches `files` of `repo` at `commit` into `directory`, verifying each and renaming it into
    /// place. `alreadyComplete` files only count towards progress. Blocks the calling thread.
    /// `indexedAs`: the directory's name in the Xet chunk index when `directory` is reached
    /// through a descriptor (a daemon's `/proc/self/fd/N`, which names nothing to other processes).
    /// - Throws: `HubError` (HTTP answers, exhausted retries), `CacheError` (checksum, disk),
    ///   `CancellationError` when `isCancelled` turns true; staged progress is kept for a resume.
    public func fetch(_ files: [RepoFile], alreadyComplete: [RepoFile] = [], repo: RepoID, commit: String,
                      into directory: ModelDirectory, indexedAs: ModelDirectory? = nil,
                      progress: @escaping @Sendable (TransferProgress) -> Void = { _ in },
                      isCancelled: @escaping @Sendable () -> Bool = { false }) throws {
        try CurlLibrary.load()
        let run = TransferRun(engine: self, repo: repo, commit: commit, directory: directory,
                              progress: progress, isCancelled: isCancelled)
        run.indexedDirectory = indexedAs ?? directory
        try run.execute(files, alreadyComplete: alreadyComplete)
    }
}

/// The state of one `fetch` call; lives on the calling thread except where noted.
final class TransferRun: @unchecked Sendable {
    let engine: TransferEngine
    let repo: RepoID
    let commit: String
    let directory: ModelDirectory
    /// `directory` as the Xet chunk index names its final files (TransferEngine.fetch's `indexedAs`).
    lazy var indexedDirectory: ModelDirectory = directory
    let isCancelled: @Sendable () -> Bool
    var settings: DownloadSettings { engine.settings }
    let policy: RangeAttemptPolicy
    let locator: FileLocator
    let meter: ProgressMeter

    // The loop's state (TransferLoop).
    let multi = CurlMulti()
    var idleHandles: [CurlEasy] = []
    var ready: [RangeJob] = []
    var active: [ObjectIdentifier: (job: RangeJob, easy: CurlEasy)] = [:]
    var tasks: [FileTask] = []
    var fatal: Error?
    /// How often the heads of a file's ranges in flight are recorded (with its next sidecar
    /// write): after this long, or after this many new bytes of the file, whichever is first.
    static let partialNoteInterval: TimeInterval = 0.25
    static let partialNoteBytes: Int64 = 4 << 20
    /// How often the write path runs the loop's bookkeeping (`tick`) while a poll lasts.
    static let tickInterval: Double = 0.1
    /// When `tick` last ran (CLOCK_MONOTONIC seconds).
    var lastTick: Double = 0
    /// Errors of single files (the first is thrown once the other files are done).
    var failedFiles: [Error] = []
    lazy var durability = FileDurability(wake: { [multi] in multi.wakeup() })

    /// Staging locks this run holds (one per file it writes), and files another process holds.
    lazy var locks = HeldLocks(lease: settings.lease)
    var heldElsewhere: [RepoFile] = []

    init(engine: TransferEngine, repo: RepoID, commit: String, directory: ModelDirectory,
         progress: @escaping @Sendable (TransferProgress) -> Void, isCancelled: @escaping @Sendable () -> Bool) {
        self.engine = engine
        self.repo = repo
        self.commit = commit
        self.directory = directory
        self.isCancelled = isCancelled
        policy = RangeAttemptPolicy(retry: engine.settings.retry, endpoint: engine.client.endpoint, canRestartAsOneStream: true)
        locator = FileLocator(client: engine.client, rangeThreshold: engine.settings.rangeThreshold)
        meter = ProgressMeter(progress: progress)
    }

    func execute(_ files: [RepoFile], alreadyComplete: [RepoFile]) throws {
        meter.begin(files, alreadyComplete: alreadyComplete)
        do {
            // Xet-backed files first, natively (XetTransfer.swift); the rest, and any Xet file an
            // earlier plain fetch began, by ranges or streams.
            let xet = settings.xet ? files.filter { $0.xetHash != nil && $0.size > 0 } : []
            let xetPaths = Set(xet.map { PathBytes($0.path) })
            let resumedPlainly = try fetchXet(xet)
            try plan(files.filter { !xetPaths.contains(PathBytes($0.path)) } + resumedPlainly)
            meter.report(force: true)
            try loop()
            locks.releaseAll()
            try waitForOtherWriters()
            for task in tasks { task.syncQueue.sync {} }  // failed files' progress is recorded
            if let first = failedFiles.first { throw first }
        } catch {
            shutDown()
            if error is CancellationError, finishedAnyway(files) { return }
            // A full disk: the staging files and sidecars stay (with the heads of unfinished
            // ranges), and the error says how much more room the rest needs.
            throw DiskSpace.explain(error, directory: directory,
                                    needed: tasks.filter { !$0.finalizing }.reduce(0) { $0 + $1.staging.remainingBytes },
                                    staged: tasks.filter { !$0.finalizing }.map(\.file.path))
        }
        meter.report(force: true)
    }

    /// After a cancel and `shutDown` (which waits for finalizations under way): true when every
    /// file of the run is final anyway (the cancel landed while the last one was renamed into
    /// place), reported as done, so the caller says "done", not "interrupted".
    private func finishedAnyway(_ files: [RepoFile]) -> Bool {
        guard failedFiles.isEmpty, files.allSatisfy({ directory.isComplete($0) }) else { return false }
        for (task, error) in durability.takeFinalized() where error == nil {
            meter.fileDone(task.file.path)
            meter.report(force: true, completed: task.file.path)
        }
        meter.report(force: true)
        return true
    }

    /// Files another live process is staging: wait until they are final, or take them over
    /// when their writer goes away.
    private func waitForOtherWriters() throws {
        while !heldElsewhere.isEmpty {
            if isCancelled() { throw CancellationError() }
            var takeOver: [RepoFile] = []
            try heldElsewhere.removeAll { file in
                if directory.isComplete(file) {
                    meter.fileDone(nil, bytes: file.size)
                    meter.report(force: true, completed: file.path)
                    return true
                }
                if let lock = try StagingLock.take(file.path, in: directory, owner: owner, lease: settings.lease) {
                    lock.release()
                    takeOver.append(file)
                    return true
                }
                return false
            }
            if !takeOver.isEmpty {
                let run = TransferRun(engine: engine, repo: repo, commit: commit, directory: directory,
                                      progress: meter.progress, isCancelled: isCancelled)
                run.indexedDirectory = indexedDirectory
                try run.execute(takeOver, alreadyComplete: [])
                for file in takeOver { meter.fileDone(nil, bytes: file.size) }
            } else if !heldElsewhere.isEmpty {
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    var owner: LockOwner { LockOwner(node: settings.node) }

    /// Records how far into its range `job` got (durable once the next persist has synced).
    func recordHead(_ job: RangeJob) {
        guard let index = job.index, job.task.ranged, !job.task.wholeFallback, !job.task.finalizing, !job.writer.isComplete else { return }
        let head = job.writer.start + job.writer.written - job.task.staging.range(index).start
        if head > 0 { job.task.staging.recordPartial(index, bytes: head) }
    }

    /// One file cannot be fetched (404, gated, changed on the server, retries used up, checksum):
    /// its jobs stop and its progress is kept, the other files of the set go on to be finalized,
    /// and the call fails at the end naming this file. Only what concerns every file (a full
    /// disk, a lost lock, cancelling) stops the whole set.
    func failFile(_ task: FileTask, _ error: Error) {
        guard !task.finalizing else { return }
        task.finalizing = true
        dropTransfers(of: task)
        task.syncQueue.async { try? task.staging.persist() }
        failedFiles.append(error)
        durability.countFailed()
    }

    /// Stops every transfer and makes the progress so far durable, for a resume.
    private func shutDown() {
        for (_, entry) in active {
            multi.remove(entry.easy)
            entry.job.task.staging.releaseDescriptor()
        }
        // The heads of unfinished ranges go into the sidecar (after the sync below), so the
        // next call resumes each range where it stopped, not from its start.
        for job in active.values.map(\.job) + ready { recordHead(job) }
        active.removeAll()
        durability.settle(tasks)
        locks.releaseAll()
    }
}

/// A fixed-size array written from concurrent iterations.
final class LockedArray<T>: @unchecked Sendable {
    private var items: [T]
    private let lock = NSLock()
    init(count: Int, initial: T) { items = Array(repeating: initial, count: count) }
    subscript(i: Int) -> T {
        get { lock.withLock { items[i] } }
        set { lock.withLock { items[i] = newValue } }
    }
}
