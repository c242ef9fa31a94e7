// HubShutdown - lets a connection thread sleep (a stall, rate pacing) and still wake the
// moment the hub is stopped.
import Foundation

final class HubShutdown: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false

    var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// Sleeps `seconds`; false when the hub stopped meanwhile.
    func sleep(_ seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: max(0, seconds))
        condition.lock()
        defer { condition.unlock() }
        while !stopped {
            if !condition.wait(until: deadline) { return true }
        }
        return false
    }
}
