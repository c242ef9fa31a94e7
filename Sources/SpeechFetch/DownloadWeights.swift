// DownloadWeights - speech-swift's static downloader names (`downloadWeights`, `weightsExist`,
// the stall guard and its settings) as a thin layer over `HuggingFaceDownloader`, so code written
// against the seed's library compiles and behaves the same on Linux (docs/api.md).
import Foundation
import ModelCache
import SharedFiles
import Synchronization

extension HuggingFaceDownloader {
    private static let sharedDownloader = Mutex<HuggingFaceDownloader?>(nil)

    /// The one downloader the static names use: made from the process environment at first use;
    /// replace it to configure them (endpoint, cache base, tuning) from code.
    public static var shared: HuggingFaceDownloader {
        get {
            sharedDownloader.withLock { made in
                if let made { return made }
                let downloader = HuggingFaceDownloader()
                made = downloader
                return downloader
            }
        }
        set { sharedDownloader.withLock { $0 = newValue } }
    }

    // MARK: Settings

    /// Seconds without progress after which `withDownloadStallGuard` stops an attempt:
    /// `HF_DOWNLOAD_STALL_TIMEOUT`, default 300.
    public static var downloadStallTimeoutSeconds: Int { max(1, Int(shared.settings.stallTimeout.rounded())) }

    /// Pauses between attempts (`SPEECH_FETCH_RETRY_DELAYS`, default 5, 15, 30, 60), one per retry.
    public static var downloadRetryDelaysSeconds: [Int] {
        let retry = shared.settings.retry
        return (1..<max(2, retry.attempts)).map { Int(retry.delay(afterAttempt: $0, retryAfter: nil).rounded()) }
    }

    /// Attempts per download, the first included (`SPEECH_FETCH_RETRY_ATTEMPTS`, default 5).
    public static var downloadMaxAttempts: Int { downloadRetryDelaysSeconds.count + 1 }

    // MARK: Weights on disk

    /// What counts as model weights: safetensors files and CoreML bundles.
    public static let weightFileExtensions: Set<String> = ["safetensors", "mlmodelc", "mlpackage"]

    /// True when `directory` holds weights (a `.safetensors` file or a `.mlmodelc`/`.mlpackage`
    /// bundle at its top level) and every shard each `*.safetensors.index.json` in it names is
    /// present. Other files (config, tokenizer, README) do not count; staging does not either.
    /// The walk for indexes is `FileTree.walk` (no link to a folder followed, each folder once, at
    /// most `ModelDirectory.maxWalkDepth` folders deep), passing over the weight bundles; an index
    /// may be a link to a file.
    public static func weightsExist(in directory: URL) -> Bool {
        guard let top = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return false }
        guard top.contains(where: { !ModelLayout.isBookkeeping($0) && weightFileExtensions.contains(($0 as NSString).pathExtension) })
        else { return false }
        let entries = FileTree.walk(directory.path, maxDepth: ModelDirectory.maxWalkDepth, followingRootLink: true) { path, facts in
            (!path.contains("/") && ModelLayout.isBookkeeping(path))
                || (facts.isDirectory && weightFileExtensions.contains((path as NSString).pathExtension))
        }
        for entry in entries where ShardIndex.isIndexPath(entry.path) {
            var st = stat()
            guard stat(entry.fullPath, &st) == 0, (st.st_mode & S_IFMT) != S_IFDIR else { continue }  // a dangling link, a link to a folder
            guard let index = try? ShardIndex(contentsOf: URL(fileURLWithPath: entry.fullPath), path: entry.path),
                  index.shards.allSatisfy({ FileManager.default.fileExists(atPath: directory.path + "/" + $0) }) else { return false }
        }
        return true
    }

    // MARK: Download

    /// Downloads a model's weights into `directory` (its own folder, as `cacheDir`):
    /// `config.json`, every `*.safetensors` (narrowed by `model.safetensors.index.json`) unless
    /// `additionalFiles` names safetensors itself, and `additionalFiles` (globs; a name the repo
    /// lacks is skipped). `offlineMode`: no network; weights present (`weightsExist`) return at
    /// once, else a cache miss naming the directory. With `backgroundTransfer` set the transfer
    /// is handed to speech-fetchd and bounded by its `resourceTimeout`; otherwise it runs in this
    /// process under `withDownloadStallGuard`, and a stalled attempt is retried after the next of
    /// `retryDelaysSeconds` (default `downloadRetryDelaysSeconds`), resuming from what it staged.
    public static func downloadWeights(modelId: String, to directory: URL, additionalFiles: [String] = [],
                                       offlineMode: Bool = false, retryDelaysSeconds: [Int]? = nil,
                                       progressHandler: (@Sendable (Double) -> Void)? = nil) async throws {
        if offlineMode {
            guard weightsExist(in: directory) else {
                throw CacheError.cacheMiss(repo: modelId, directory: directory.path,
                                           missing: ["model weights (*.safetensors, *.mlmodelc, *.mlpackage)"],
                                           reason: "offline mode")
            }
            progressHandler?(1.0)
            return
        }
        var patterns = ["config.json"]
        if !additionalFiles.contains(where: { $0.hasSuffix(".safetensors") }) {
            patterns += ["*.safetensors", "model.safetensors.index.json"]
        }
        for file in additionalFiles where !patterns.contains(file) { patterns.append(file) }
        let include = patterns.map(discovery)
        let downloader = shared
        let delays = retryDelaysSeconds ?? downloadRetryDelaysSeconds
        let report: @Sendable (DownloadProgress) -> Void = { progressHandler?($0.fraction) }
        for attempt in 1...(delays.count + 1) {
            do {
                if let background = backgroundTransfer {
                    try downloader.ensureDaemon(base: downloader.defaultCacheBase, discretionary: background.isDiscretionary)
                    _ = try await downloader.downloadWithResult(repo: modelId, include: include, cacheDir: directory,
                                                                host: .automatic, requestTimeout: background.resourceTimeout,
                                                                progress: report)
                } else {
                    try await withDownloadStallGuard(modelId: modelId) { tick in
                        _ = try await downloader.downloadWithResult(repo: modelId, include: include, cacheDir: directory,
                                                                    host: .embedded, progress: { tick($0.fraction); report($0) })
                    }
                }
                return
            } catch DownloadError.stalled(let id, let seconds) {
                guard attempt <= delays.count else { throw DownloadError.stalled(modelId: id, seconds: seconds) }
                try await Task.sleep(for: .seconds(delays[attempt - 1]))
            }
        }
    }

    /// A pattern that may match nothing: a plain name becomes a glob of itself (`[c]onfig.json`),
    /// because discovery skips names a repo lacks where a literal `include` must exist.
    static func discovery(_ pattern: String) -> String {
        guard !FileSelection.isPattern(pattern), let first = pattern.first, first != "]" else { return pattern }
        return "[\(first)]" + pattern.dropFirst()
    }

    // MARK: Stall guard

    /// Runs `operation`, which calls its argument with the progress so far, and stops it with
    /// `DownloadError.stalled` when the value did not move for `stallTimeoutSeconds` (default
    /// `downloadStallTimeoutSeconds`). Stopping cancels the operation's task: a download keeps
    /// what it staged. The guard returns at once; it does not wait for an operation that
    /// ignores cancellation (which then finishes, or not, on its own). Cancelling the caller's
    /// task cancels the operation and ends the call with `CancellationError`. Not used for a
    /// transfer speech-fetchd performs (`backgroundTransfer`).
    public static func withDownloadStallGuard(
        modelId: String, stallTimeoutSeconds: Int? = nil,
        _ operation: @escaping @Sendable (@escaping @Sendable (Double) -> Void) async throws -> Void
    ) async throws {
        let stall = Double(stallTimeoutSeconds ?? downloadStallTimeoutSeconds)
        let clock = ProgressClock()
        let outcome = Outcome()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                outcome.begin(continuation)
                let work = Task {
                    do {
                        try await operation { clock.tick($0) }
                        outcome.finish(.success(()))
                    } catch {
                        outcome.finish(.failure(error))
                    }
                }
                let watch = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(max(0.1, stall / 3)))
                        if clock.idleSeconds >= stall {
                            outcome.finish(.failure(DownloadError.stalled(modelId: modelId, seconds: Int(stall))))
                            return
                        }
                    }
                }
                outcome.onFinish { work.cancel(); watch.cancel() }
            }
        } onCancel: {
            outcome.finish(.failure(CancellationError()))
        }
    }
}

/// The one result of a guarded operation: the first of its end, a stall, or cancelling wins;
/// the continuation is resumed exactly once, and whoever comes later is ignored.
private final class Outcome: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, Error>?
        var early: Result<Void, Error>?
        var cleanup: (@Sendable () -> Void)?
        var done = false
    }
    private let state = Mutex(State())

    func begin(_ continuation: CheckedContinuation<Void, Error>) {
        let early: Result<Void, Error>? = state.withLock { s in
            if let early = s.early { return early }
            s.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func onFinish(_ cleanup: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.done { return true }
            s.cleanup = cleanup
            return false
        }
        if now { cleanup() }
    }

    func finish(_ result: Result<Void, Error>) {
        let (continuation, cleanup) = state.withLock { s -> (CheckedContinuation<Void, Error>?, (@Sendable () -> Void)?) in
            guard !s.done else { return (nil, nil) }
            s.done = true
            if s.continuation == nil { s.early = result }
            defer { s.continuation = nil; s.cleanup = nil }
            return (s.continuation, s.cleanup)
        }
        continuation?.resume(with: result)
        cleanup?()
    }
}

/// When progress last moved (from any thread): a report of the same value again is no progress.
/// On the monotonic clock: a wall clock set back must not hide a stall.
private final class ProgressClock: Sendable {
    private let last = Mutex((at: MonotonicClock.seconds(), value: -1.0))
    func tick(_ value: Double) {
        last.withLock { if value != $0.value { $0 = (MonotonicClock.seconds(), value) } }
    }
    var idleSeconds: Double { last.withLock { MonotonicClock.seconds() - $0.at } }
}
