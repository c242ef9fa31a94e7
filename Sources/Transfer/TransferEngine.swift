// TransferEngine - fetches a set of files into a model directory with libcurl's multi interface.
//
// Large files go as concurrent byte ranges, small ones as single streams, all under one
// concurrency limit for the whole set. Bytes are written to the staging file as they arrive;
// each file's hash advances on its own queue while the transfer runs, and finished ranges are
// recorded in its sidecar as soon as they are synced, so a process killed at any point
// resumes where it stopped.
import Curl
import Foundation
import HubClient
import ModelCache

public final class TransferEngine: @unchecked Sendable {
    public let client: HubClient
    public let settings: DownloadSettings

    public init(client: HubClient, settings: DownloadSettings) {
        self.client = client
        self.settings = settings.normalized()
    }

    /// Fetches `files` of `repo` at `commit` into `directory`, verifying each and renaming it into
    /// place. `alreadyComplete` files only count towards progress. Blocks the calling thread.
    /// - Throws: `HubError` (HTTP answers, exhausted retries), `CacheError` (checksum, disk),
    ///   `CancellationError` when `isCancelled` turns true; staged progress is kept for a resume.
    public func fetch(_ files: [RepoFile], alreadyComplete: [RepoFile] = [], repo: RepoID, commit: String,
                      into directory: ModelDirectory, progress: @escaping @Sendable (TransferProgress) -> Void = { _ in },
                      isCancelled: @escaping @Sendable () -> Bool = { false }) throws {
        try CurlLibrary.load()
        let run = TransferRun(engine: self, repo: repo, commit: commit, directory: directory,
                              progress: progress, isCancelled: isCancelled)
        try run.execute(files, alreadyComplete: alreadyComplete)
    }
}

/// The state of one `fetch` call; lives on the calling thread except where noted.
final class TransferRun: @unchecked Sendable {
    let engine: TransferEngine
    let repo: RepoID
    let commit: String
    let directory: ModelDirectory
    let progress: @Sendable (TransferProgress) -> Void
    let isCancelled: @Sendable () -> Bool
    var settings: DownloadSettings { engine.settings }

    let multi = CurlMulti()
    var idleHandles: [CurlEasy] = []
    var ready: [RangeJob] = []
    var active: [ObjectIdentifier: (job: RangeJob, easy: CurlEasy)] = [:]
    var tasks: [FileTask] = []
    var fatal: Error?
    /// Errors of single files (the first is thrown once the other files are done).
    var failedFiles: [Error] = []
    /// Staging locks this run holds (one per file it writes), and files another process holds.
    lazy var locks = HeldLocks(lease: settings.lease)
    var heldElsewhere: [RepoFile] = []

    // Progress.
    var completedBytes: Int64 = 0
    var totalBytes: Int64 = 0
    var filesDone = 0
    var filesTotal = 0
    var currentFile: String?
    var lastReport = Date.distantPast
    var samples: [(Date, Int64)] = []

    // Messages from the file queues, read on the calling thread.
    let inboxLock = NSLock()
    var finalized: [(FileTask, Error?)] = []

    init(engine: TransferEngine, repo: RepoID, commit: String, directory: ModelDirectory,
         progress: @escaping @Sendable (TransferProgress) -> Void, isCancelled: @escaping @Sendable () -> Bool) {
        self.engine = engine
        self.repo = repo
        self.commit = commit
        self.directory = directory
        self.progress = progress
        self.isCancelled = isCancelled
    }

    func execute(_ files: [RepoFile], alreadyComplete: [RepoFile]) throws {
        filesTotal = files.count + alreadyComplete.count
        filesDone = alreadyComplete.count
        totalBytes = (files + alreadyComplete).reduce(0) { $0 + $1.size }
        completedBytes = alreadyComplete.reduce(0) { $0 + $1.size }
        do {
            try plan(files)
            report(force: true)
            try loop()
            releaseLocks()
            try waitForOtherWriters()
            for task in tasks { task.syncQueue.sync {} }  // failed files' progress is recorded
            if let first = failedFiles.first { throw first }
        } catch {
            shutDown()
            // A full disk: the staging files and sidecars stay (with the heads of unfinished
            // ranges), and the error says how much more room the rest needs.
            throw DiskSpace.explain(error, directory: directory,
                                    needed: tasks.filter { !$0.finalizing }.reduce(0) { $0 + $1.staging.remainingBytes },
                                    staged: tasks.filter { !$0.finalizing }.map(\.file.path))
        }
        report(force: true)
    }

    /// Files another live process is staging: wait until they are final, or take them over
    /// when their writer goes away.
    private func waitForOtherWriters() throws {
        while !heldElsewhere.isEmpty {
            if isCancelled() { throw CancellationError() }
            var takeOver: [RepoFile] = []
            heldElsewhere.removeAll { file in
                if directory.isComplete(file) {
                    filesDone += 1
                    completedBytes += file.size
                    report(force: true, completed: file.path)
                    return true
                }
                if let lock = StagingLock.acquire(file.path, in: directory, owner: owner, lease: settings.lease) {
                    lock.release()
                    takeOver.append(file)
                    return true
                }
                return false
            }
            if !takeOver.isEmpty {
                let run = TransferRun(engine: engine, repo: repo, commit: commit, directory: directory,
                                      progress: progress, isCancelled: isCancelled)
                try run.execute(takeOver, alreadyComplete: [])
                filesDone += takeOver.count
                completedBytes += takeOver.reduce(0) { $0 + $1.size }
            } else if !heldElsewhere.isEmpty {
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
    }

    private var owner: LockOwner { LockOwner(node: settings.node) }

    private func releaseLocks() { locks.releaseAll() }

    // MARK: Planning

    private func plan(_ files: [RepoFile]) throws {
        var large: [FileTask] = []
        for file in files {
            if file.size == 0 {
                try AtomicFile.write(Data(), to: ensureParent(directory.finalURL(file.path)))
                filesDone += 1
                continue
            }
            guard let lock = StagingLock.acquire(file.path, in: directory, owner: owner, lease: settings.lease) else {
                heldElsewhere.append(file)
                continue
            }
            locks.add(lock)
            let ranged = file.size >= settings.rangeThreshold
            let staging = try StagingFile(file: file, in: directory, commit: commit,
                                          rangeSize: ranged ? settings.rangeSize : file.size)
            let task = FileTask(file: file, staging: staging, ranged: ranged,
                                url: engine.client.resolveURL(repo, commit: commit, path: file.path))
            tasks.append(task)
            completedBytes += task.countedBytes
            if ranged { large.append(task) }
        }
        try locate(large)
        for task in tasks where !task.finalizing {
            if task.pending == 0 {
                startFinalize(task)
                continue
            }
            let done = task.staging.doneRanges
            for i in 0..<task.staging.rangeCount where !done.contains(i) {
                let r = task.staging.range(i)
                let job = RangeJob(task: task, index: i, start: r.start, end: r.end)
                // The durable head an earlier run recorded (it stopped early): ask for the rest.
                job.written = task.staging.partialBytes(i)
                task.countedBytes += job.written
                completedBytes += job.written
                ready.append(job)
            }
        }
    }

    /// Asks the Hub where each large file's bytes are (the CDN redirect), a few at a time.
    private func locate(_ large: [FileTask]) throws {
        guard !large.isEmpty else { return }
        let results = LockedArray<Result<FileLocation, Error>?>(count: large.count, initial: nil)
        DispatchQueue.concurrentPerform(iterations: large.count) { i in
            let task = large[i]
            results[i] = Result { try engine.client.locate(repo, commit: commit, path: task.file.path) }
        }
        for (i, task) in large.enumerated() {
            let location: FileLocation
            switch results[i]! {
            case .success(let found): location = found
            case .failure(let error):
                failFile(task, error)
                continue
            }
            if let size = location.size, size != task.file.size {
                failFile(task, HubError.badResponse(url: location.url,
                                                    reason: "\(task.file.path) is \(size) bytes there but \(task.file.size) in the tree"))
                continue
            }
            task.url = location.url
        }
    }

    private func ensureParent(_ url: URL) throws -> URL {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        return url
    }

    // MARK: The loop

    private func loop() throws {
        while true {
            if let fatal { throw fatal }
            if isCancelled() { throw CancellationError() }
            drainInbox()
            if let fatal { throw fatal }
            if ready.isEmpty && active.isEmpty && tasks.allSatisfy({ $0.finalizing }) && allFinalized { return }
            startJobs()
            for (easy, result) in multi.poll(timeoutMs: active.isEmpty ? 20 : 100) {
                guard let entry = active.removeValue(forKey: ObjectIdentifier(easy)) else { continue }
                idleHandles.append(easy)
                handle(entry.job, result)
            }
            // Done ranges become durable promptly: one sync at a time per file, so a crash
            // loses little more than the ranges in flight.
            for task in tasks where task.dirty { scheduleSync(task) }
            if locks.anyLost {
                throw CacheError.io(path: directory.stagingDirectory.path,
                                    operation: "keep writing (another process broke a staging lock of this download in)",
                                    errno: ESTALE)
            }
            report(force: false)
        }
    }

    private var finalizedCount = 0
    private var allFinalized: Bool { finalizedCount == tasks.count }

    private func drainInbox() {
        let messages: [(FileTask, Error?)] = inboxLock.withLock {
            defer { finalized.removeAll() }
            return finalized
        }
        for (task, error) in messages {
            finalizedCount += 1
            if let error {
                // A file that did not verify was deleted; the others go on.
                failedFiles.append(error)
                continue
            }
            filesDone += 1
            currentFile = task.file.path
            report(force: true, completed: task.file.path)
        }
    }

    private func startJobs() {
        guard fatal == nil else { return }
        let now = Date()
        var i = 0
        while active.count < settings.concurrency && i < ready.count {
            let job = ready[i]
            if job.notBefore > now { i += 1; continue }
            ready.remove(at: i)
            start(job)
        }
    }

    private func start(_ job: RangeJob) {
        let easy = idleHandles.popLast() ?? CurlEasy()
        job.failure = nil
        var request = HTTPRequest(url: job.url, headers: engine.client.headers(for: job.url),
                                  connectTimeout: settings.connectTimeout, stallTimeout: settings.stallTimeout)
        let ranged = job.sendsRange
        if ranged { request.range = (job.start + job.written, job.end) }
        easy.prepare(request, onResponse: { [unowned self] status, headers in
            self.accept(job, status: status, headers: headers, ranged: ranged)
        }, onBody: { [unowned self] bytes in
            self.write(job, bytes)
        })
        active[ObjectIdentifier(easy)] = (job, easy)
        multi.add(easy)
    }

    /// Decides, from status and headers alone, whether this body may be written for `job`.
    private func accept(_ job: RangeJob, status: Int, headers: HTTPHeaders, ranged: Bool) -> BodyDisposition {
        switch RangeResponse.verdict(status: status, headers: headers, url: job.url, from: job.start + job.written,
                                     end: job.end, size: job.task.file.size, ranged: ranged,
                                     isHubOrigin: engine.client.endpoint.isSameOrigin(job.url)) {
        case .stream(let etag):
            return pin(job, etag) ? .stream : .abort
        case .refuse(let why):
            job.failure = why
            return .abort
        case .errorBody:
            return .collect(limit: 64 << 10)
        }
    }

    /// Every range of a file must carry the ETag its first range came with.
    private func pin(_ job: RangeJob, _ etag: String?) -> Bool {
        guard let etag else { return true }
        if let pinned = job.task.pinnedEtag, pinned != etag {
            job.failure = .changedOnServer("ETag changed from \(pinned) to \(etag)")
            return false
        }
        job.task.pinnedEtag = etag
        return true
    }

    private func write(_ job: RangeJob, _ bytes: UnsafeRawBufferPointer) -> Bool {
        let offset = job.start + job.written
        let room = job.end - offset + 1
        let take = min(Int64(bytes.count), max(0, room))
        do {
            if take > 0 { try job.task.staging.write(UnsafeRawBufferPointer(rebasing: bytes[0..<Int(take)]), at: offset) }
        } catch {
            job.failure = .write(error)
            return false
        }
        job.written += take
        job.task.countedBytes += take
        completedBytes += take
        currentFile = job.task.file.path
        if take < Int64(bytes.count) {
            job.failure = .overflow
            return false
        }
        return true
    }

    // MARK: Results

    private func handle(_ job: RangeJob, _ result: CurlResult) {
        switch result {
        case .response(let response):
            if (200..<300).contains(response.status) {
                if job.isComplete { complete(job) } else {
                    retry(job, HubError.transport(TransportError(code: 18, message: "body ended after \(job.written) of \(job.length) bytes", url: job.url)))
                }
            } else {
                let error = HubError.from(response, repo: repo, revision: commit, path: job.task.file.path)
                error.isRetryable ? retry(job, error) : failFile(job.task, error)
            }
        case .transport(let error):
            retry(job, HubError.transport(error))
        case .aborted(let status, let headers):
            handleRefusal(job, status: status, headers: headers)
        }
    }

    private func handleRefusal(_ job: RangeJob, status: Int, headers: HTTPHeaders) {
        switch job.failure {
        case .redirect(let target):
            job.redirects += 1
            guard job.redirects <= 10 else { return failFile(job.task, HubError.badResponse(url: job.url, reason: "too many redirects")) }
            job.url = target
            ready.insert(job, at: 0)
        case .rangeIgnored:
            restartAsOneStream(job.task)
        case .expiredLocation:
            job.attempts += 1
            guard job.attempts < settings.retry.attempts else {
                return failFile(job.task, HubError.http(status: 403, url: job.url, message: "the download location keeps expiring", retryAfter: nil))
            }
            do {
                let location = try engine.client.locate(repo, commit: commit, path: job.task.file.path)
                job.task.url = location.url
                for other in ready where other.task === job.task { other.url = location.url }
                job.url = location.url
                ready.insert(job, at: 0)
            } catch {
                failFile(job.task, error)
            }
        case .badRange(let why):
            retry(job, HubError.badResponse(url: job.url, reason: why))
        case .changedOnServer(let why):
            failFile(job.task, HubError.badResponse(url: job.url, reason: "\(job.task.file.path) changed on the server during the transfer (\(why)); run the download again"))
        case .write(let error):
            // What reached the staging file before the write failed (a full disk) is kept.
            if let index = job.index, job.written > 0 { job.task.staging.recordPartial(index, bytes: job.written) }
            fail(error)
        case .overflow:
            failFile(job.task, HubError.badResponse(url: job.url, reason: "the server sent more bytes than its Content-Range promised"))
        case nil:
            retry(job, HubError.badResponse(url: job.url, reason: "transfer stopped (HTTP \(status))"))
        }
    }

    /// Backs off and queues the job again, resuming after the bytes it already wrote.
    private func retry(_ job: RangeJob, _ error: HubError) {
        job.attempts += 1
        guard error.isRetryable || isBadResponse(error), job.attempts < settings.retry.attempts else {
            return failFile(job.task, error)
        }
        job.notBefore = Date().addingTimeInterval(settings.retry.delay(afterAttempt: job.attempts, retryAfter: error.retryAfter))
        ready.append(job)
    }

    private func isBadResponse(_ error: HubError) -> Bool {
        if case .badResponse = error { return true }
        return false
    }

    private func fail(_ error: Error) {
        if fatal == nil { fatal = error }
    }

    /// One file cannot be fetched (404, gated, changed on the server, retries used up, checksum):
    /// its jobs stop and its progress is kept, the other files of the set go on to be finalized,
    /// and the call fails at the end naming this file. Only what concerns every file (a full
    /// disk, a lost lock, cancelling) stops the whole set.
    private func failFile(_ task: FileTask, _ error: Error) {
        guard !task.finalizing else { return }
        task.finalizing = true
        ready.removeAll { $0.task === task }
        for (key, entry) in active where entry.job.task === task {
            multi.remove(entry.easy)
            active.removeValue(forKey: key)
            idleHandles.append(entry.easy)
        }
        task.syncQueue.async { try? task.staging.persist() }
        failedFiles.append(error)
        finalizedCount += 1
    }

    private func complete(_ job: RangeJob) {
        let task = job.task
        if let index = job.index {
            task.staging.markDone(index)
            task.pending -= 1
        } else {
            task.staging.markAllDone()
            task.pending = 0
        }
        task.dirty = true
        if task.pending == 0 {
            startFinalize(task)
        } else if task.file.isLFS {
            task.queue.async { try? task.staging.advanceHash() }
        }
    }

    /// The server ignored Range: forget this file's ranges and fetch it as one stream from byte 0.
    private func restartAsOneStream(_ task: FileTask) {
        guard !task.wholeFallback else {
            return failFile(task, HubError.badResponse(url: task.url, reason: "the server ignores Range even for a whole-file request"))
        }
        task.wholeFallback = true
        ready.removeAll { $0.task === task }
        for (key, entry) in active where entry.job.task === task {
            multi.remove(entry.easy)
            active.removeValue(forKey: key)
            idleHandles.append(entry.easy)
        }
        task.queue.sync { task.staging.resetProgress() }
        completedBytes -= task.countedBytes
        task.countedBytes = 0
        task.pending = 1
        ready.insert(RangeJob(task: task, index: nil, start: 0, end: task.file.size - 1), at: 0)
    }

    // MARK: Durability and finalization (on each file's queues)

    private func scheduleSync(_ task: FileTask) {
        guard !task.finalizing, inboxLock.withLock({ !task.syncScheduled }) else { return }
        inboxLock.withLock { task.syncScheduled = true }
        task.dirty = false
        task.syncQueue.async {
            // The record (done ranges, hash state) is taken before the sync, so it never claims
            // bytes the sync did not cover; the hash goes on meanwhile on the file's queue.
            try? task.staging.persist()
            self.inboxLock.withLock { task.syncScheduled = false }
        }
    }

    private func startFinalize(_ task: FileTask) {
        task.finalizing = true
        task.queue.async {
            task.syncQueue.sync {}  // a sidecar write in flight lands before the rename, not after
            var failure: Error?
            do { try task.staging.finalize() } catch { failure = error }
            self.inboxLock.withLock { self.finalized.append((task, failure)) }
            self.multi.wakeup()
        }
    }

    /// Stops every transfer and makes the progress so far durable, for a resume.
    private func shutDown() {
        for (_, entry) in active { multi.remove(entry.easy) }
        // The heads of unfinished ranges go into the sidecar (after the sync below), so the
        // next call resumes each range where it stopped, not from its start.
        for job in active.values.map(\.job) + ready where !job.isComplete && job.written > 0 {
            if let index = job.index, !job.task.finalizing { job.task.staging.recordPartial(index, bytes: job.written) }
        }
        active.removeAll()
        for task in tasks where !task.finalizing {
            task.queue.sync {}  // hashing already queued lands in the last record
            task.syncQueue.sync { try? task.staging.persist() }
        }
        for task in tasks {
            task.queue.sync {}
            task.syncQueue.sync {}
        }
        releaseLocks()
    }

    // MARK: Progress

    private func report(force: Bool, completed: String? = nil) {
        let now = Date()
        guard force || now.timeIntervalSince(lastReport) >= 0.1 else { return }
        lastReport = now
        samples.append((now, completedBytes))
        samples.removeAll { now.timeIntervalSince($0.0) > 3 }
        var rate = 0.0
        if let first = samples.first, now.timeIntervalSince(first.0) > 0.05 {
            rate = Double(completedBytes - first.1) / now.timeIntervalSince(first.0)
        }
        progress(TransferProgress(completedBytes: completedBytes, totalBytes: totalBytes, filesDone: filesDone,
                                  filesTotal: filesTotal, currentFile: currentFile, bytesPerSecond: max(0, rate),
                                  completedFile: completed))
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
