// FileDurability - makes a run's finished ranges durable and its complete files final, on each
// file's own queues, while the run's loop goes on fetching.
//
// Done ranges are recorded in the sidecar soon after they land (one sync at a time per file), so
// a crash loses little more than the ranges in flight; a file whose last range landed is hashed
// to the end, verified and renamed into place; the loop collects the outcomes.
import Foundation
import ModelCache

final class FileDurability: @unchecked Sendable {
    private let lock = NSLock()
    private var finalized: [(FileTask, Error?)] = []
    /// Files whose finalization ended (on the run's thread).
    private(set) var finalizedCount = 0
    /// Wakes the run's loop when a file's finalization ended.
    private let wake: @Sendable () -> Void

    init(wake: @escaping @Sendable () -> Void) { self.wake = wake }

    /// Records `task`'s done ranges after a sync, unless a sync of it is already under way.
    func scheduleSync(_ task: FileTask) {
        guard !task.finalizing, lock.withLock({ !task.syncScheduled }) else { return }
        lock.withLock { task.syncScheduled = true }
        task.dirty = false
        task.syncQueue.async {
            // The record (done ranges, hash state) is taken before the sync, so it never claims
            // bytes the sync did not cover; the hash goes on meanwhile on the file's queue.
            // Heads of ranges in flight alone need no data sync (`persist`: this boot only).
            try? task.staging.persist(unsyncedHeads: true)
            self.lock.withLock { task.syncScheduled = false }
        }
    }

    /// Verifies `task`'s file and renames it into place, off the run's thread.
    func startFinalize(_ task: FileTask) {
        task.finalizing = true
        task.queue.async {
            task.syncQueue.sync {}  // a sidecar write in flight lands before the rename, not after
            var failure: Error?
            do { try task.staging.finalize() } catch { failure = error }
            self.lock.withLock { self.finalized.append((task, failure)) }
            self.wake()
        }
    }

    /// The files whose finalization ended since the last call, with the error when it failed.
    func takeFinalized() -> [(FileTask, Error?)] {
        let taken: [(FileTask, Error?)] = lock.withLock {
            defer { finalized.removeAll() }
            return finalized
        }
        // A file kept for repair is not done with: it is finalized again later.
        finalizedCount += taken.filter { outcome in
            if case CacheError.repairing? = outcome.1 { return false }
            return true
        }.count
        return taken
    }

    /// Counts a file the run gave up on (it will not be finalized) among the ended ones.
    func countFailed() { finalizedCount += 1 }

    /// Makes the progress of every unfinished file durable for a resume and waits for the
    /// files' queues to drain.
    func settle(_ tasks: [FileTask]) {
        for task in tasks where !task.finalizing {
            task.queue.sync {}  // hashing already queued lands in the last record
            task.syncQueue.sync { try? task.staging.persist() }
        }
        for task in tasks {
            task.queue.sync {}
            task.syncQueue.sync {}
        }
    }
}
