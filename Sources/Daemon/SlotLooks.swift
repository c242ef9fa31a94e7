// SlotLooks - what the slots of one worker process share between their looks at the spool:
// `SlotLooks` (the last listing and endgame look), `EndgameLookers` (which nodes race stalled
// claims), and `Wakeup` (where idle slots sleep until the spool changes).
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

/// Which nodes race stalled claims in the endgame: of the nodes holding no claim, the first
/// in an order every node computes alike (a hash of the name), and any node when the nodes
/// cannot be told. The others look at the claims' listing only, every quarter lease, until they
/// are the first.
enum EndgameLookers {
    static let count = 1

    static func looks(_ node: String, nodes: [String], holders: Set<String>) -> Bool {
        guard nodes.contains(node) else { return true }
        let idle = nodes.filter { !holders.contains($0) }.sorted { (rank($0), $0) < (rank($1), $1) }
        return idle.prefix(count).contains(node) || !idle.contains(node)
    }

    /// A hash every process computes alike (FNV-1a): an order of nodes, a place to start.
    static func rank(_ node: String) -> UInt64 {
        var hash: UInt64 = 14_695_981_039_346_656_037
        for byte in node.utf8 { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
        return hash
    }
}

/// Idle slots sleep here until the watcher thread sees the spool change (or the poll passes).
final class Wakeup: @unchecked Sendable {
    private let condition = NSCondition()
    private var generation = 0
    /// Wake-ups from outside this process (inotify, the wake word): an endgame look is for those,
    /// not for a part this process published (that only frees room in the node's share).
    private var external = 0

    func broadcast(shareOnly: Bool = false) {
        condition.lock()
        generation += 1
        if !shareOnly { external += 1 }
        condition.broadcast()
        condition.unlock()
    }

    /// The count of broadcasts so far: taken before a slot looks for work, so a broadcast
    /// during its look ends the `wait` that follows at once instead of being missed.
    func externalTicket() -> Int {
        condition.lock()
        defer { condition.unlock() }
        return external
    }

    func ticket() -> Int {
        condition.lock()
        defer { condition.unlock() }
        return generation
    }

    func wait(after seen: Int, seconds: Double) {
        condition.lock()
        let deadline = Date().addingTimeInterval(seconds)
        while generation == seen && condition.wait(until: deadline) {}
        condition.unlock()
    }
}
