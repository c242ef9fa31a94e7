// RunOffThread - the async face of the blocking calls: run one on its own thread, and turn
// task cancellation into the flag the blocking loop polls.
import Foundation

/// Runs `body` on a new thread and returns its result. Cancelling the task sets the flag
/// `body` receives; the blocking work stops at its next check and keeps what it staged.
func runOffThread<T: Sendable>(_ body: @escaping @Sendable (_ isCancelled: @escaping @Sendable () -> Bool) throws -> T) async throws -> T {
    let cancelled = CancellationFlag()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try body { cancelled.isSet } })
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    } onCancel: {
        cancelled.set()
    }
}

/// A flag set from a cancellation handler and read by a blocking loop.
final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
