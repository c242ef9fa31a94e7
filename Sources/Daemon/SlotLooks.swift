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
    private var endgameLooking = false
    private var every = 2.0

    /// Seconds between timed endgame looks (longer for a node that is not among the racers).
    var endgameEvery: Double {
        get { lock.withLock { every } }
        set { lock.withLock { every = newValue } }
    }

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
    /// One look at a time: on a slow filer a look can outlast the interval, and the slots must
    /// not start theirs meanwhile (`endgameLookDone` ends it).
    func mayLookForEndgame(ticket: Int, every seconds: Double) -> Bool {
        lock.withLock {
            let now = Date()
            guard !endgameLooking,
                  endgameTicket != ticket || (othersClaim && now.timeIntervalSince(endgameLooked) >= seconds) else { return false }
            endgameTicket = ticket
            endgameLooking = true
            return true
        }
    }

    func endgameLookDone() {
        lock.withLock {
            endgameLooking = false
            endgameLooked = Date()
        }
    }
}
