// ConcurrentFiles - the per-file steps of one pass (plan, splice) run on a few threads at once.
//
// Each file's step is a handful of small synchronous writes, each waiting for its sync (the staging
// file, the plan): one thread spends most of a step waiting on the disk or the file server, and
// steps of different files share nothing but the spool's own locked state. Run side by side, their
// waits overlap (and on a journalled filesystem their syncs share commits), so a pass over
// thousands of small files takes a fraction of the time its steps take in series
// (docs/benchmarks.md, scenario 8).
import Foundation

public enum ConcurrentFiles {
    /// Threads a pass runs its files' steps on: enough to keep several syncs waiting on one
    /// commit, few enough that the steps of one pass do not crowd out the node's workers.
    public static let width = 8

    /// Calls `step` once for each index in `0..<count`, on up to `width` threads, and returns when
    /// every call returned. A pass of one file runs on the calling thread.
    public static func forEach(_ count: Int, width: Int = ConcurrentFiles.width, _ step: @escaping @Sendable (Int) -> Void) {
        let threads = min(max(1, width), count)
        guard threads > 1 else {
            for index in 0..<count { step(index) }
            return
        }
        let next = NextIndex(below: count)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<threads {
            let thread = Thread {
                while let index = next.take() { step(index) }
                finished.signal()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        for _ in 0..<threads { finished.wait() }
    }
}

/// The next index a thread of `ConcurrentFiles.forEach` takes.
private final class NextIndex: @unchecked Sendable {
    private let lock = NSLock()
    private var next = 0
    private let end: Int

    init(below end: Int) { self.end = end }

    func take() -> Int? {
        lock.withLock {
            guard next < end else { return nil }
            defer { next += 1 }
            return next
        }
    }
}
