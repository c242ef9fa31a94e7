// SlotLooks - what the slots of one worker process share about their last looks at the spool.
import Foundation

/// What the slots of one worker process learned at their last looks (shared by the slots), so
/// that a wake-up costs one listing of `jobs/ready` for the process, not one per slot.
final class SlotLooks: @unchecked Sendable {
    private let lock = NSLock()
    private var listedTicket = -1
    private var lastClaimed = false
    private var endgameTicket = -1
    private var endgameLooked = Date.distantPast
    private var othersClaim = false

    /// Another node held claims at the last endgame look: one may stall, so idle slots look again
    /// after a while even without a wake-up.
    var othersHoldClaims: Bool {
        get { lock.withLock { othersClaim } }
        set { lock.withLock { othersClaim = newValue } }
    }

    /// Whether a slot lists `jobs/ready` now: after a wake-up it has not listed for, after a look
    /// that claimed (more may be there), or when the slot has just finished a range (its share
    /// has room again).
    func shouldList(ticket: Int, afterWork: Bool) -> Bool {
        lock.withLock { afterWork || lastClaimed || listedTicket != ticket }
    }

    func listed(ticket: Int, claimed: Bool) {
        lock.withLock {
            listedTicket = ticket
            lastClaimed = claimed
        }
    }

    /// One endgame look per wake-up for the whole process, and while another node holds claims
    /// one per `seconds` (a stalled claim is noticed by its bytes not growing between looks).
    func mayLookForEndgame(ticket: Int, every seconds: Double) -> Bool {
        lock.withLock {
            let now = Date()
            guard endgameTicket != ticket || (othersClaim && now.timeIntervalSince(endgameLooked) >= seconds) else { return false }
            endgameTicket = ticket
            endgameLooked = now
            return true
        }
    }
}
