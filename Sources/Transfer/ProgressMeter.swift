// ProgressMeter - byte-weighted progress of one transfer run, and its rate over the last seconds.
import ByteUnits
import Foundation
import HubTypes

/// Counts a run's bytes and files and reports them at most every 0.1 s (or at once when forced).
/// Used on the run's thread only.
final class ProgressMeter {
    /// Where reports go (the caller's callback).
    let progress: @Sendable (TransferProgress) -> Void
    private(set) var completedBytes: Int64 = 0
    private var totalBytes: Int64 = 0
    private var filesDone = 0
    private var filesTotal = 0
    /// The file that most recently received bytes or completed.
    var currentFile: String?
    private var lastReport = Date.distantPast
    private var rate = RateMeter(window: 3)

    init(progress: @escaping @Sendable (TransferProgress) -> Void) { self.progress = progress }

    /// Starts the count: `files` to fetch, `alreadyComplete` counted as done.
    func begin(_ files: [RepoFile], alreadyComplete: [RepoFile]) {
        filesTotal = files.count + alreadyComplete.count
        filesDone = alreadyComplete.count
        totalBytes = (files + alreadyComplete).reduce(0) { $0 + $1.size }
        completedBytes = alreadyComplete.reduce(0) { $0 + $1.size }
    }

    /// Bytes that reached the disk (negative when a restart forgets some).
    func add(bytes: Int64) { completedBytes += bytes }

    /// A file that is final: its bytes counted when `bytes` is given (a file another process wrote).
    func fileDone(_ path: String?, bytes: Int64 = 0) {
        filesDone += 1
        completedBytes += bytes
        if let path { currentFile = path }
    }

    func report(force: Bool, completed: String? = nil) {
        let now = Date()
        guard force || now.timeIntervalSince(lastReport) >= 0.1 else { return }
        lastReport = now
        let bytesPerSecond = rate.add(completedBytes, now: now.timeIntervalSinceReferenceDate)
        progress(TransferProgress(completedBytes: completedBytes, totalBytes: totalBytes, filesDone: filesDone,
                                  filesTotal: filesTotal, currentFile: currentFile, bytesPerSecond: bytesPerSecond,
                                  completedFile: completed))
    }
}

