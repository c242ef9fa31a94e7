// ClaimEnds - how a worker's claim ends, as operations of the spool (the layers above never use
// its paths): the part synced and published, the claim dropped without giving the range back, an
// unfinished part discarded; and the touch that wakes this node's waiters when another node
// settled their request.
import Foundation
import SharedFiles

extension Spool {
    /// Makes a finished part durable (fsync, the close checked), refreshes its claim, and publishes
    /// it (`publishPart`): false when another part of the range was published first.
    public func syncAndPublishPart(_ temp: String, for claim: ClaimedJob) throws -> Bool {
        try SpoolFS.syncFile(temp)
        refresh(claim)
        return try publishPart(temp, for: claim)
    }

    /// Ends a claim without giving its range back: the range's failure is recorded, or an endgame
    /// duplicate stops.
    public func dropClaim(_ claim: ClaimedJob) { unlink(claim.path) }

    /// Deletes a part this process was writing (`partTempPath`) that will not be published.
    public func discardPart(_ temp: String) { unlink(temp) }

    /// Touches the request's done or failed marker, if it has one: a local change in the folders
    /// this node's waiters watch, which wakes them at once where inotify cannot see the node that
    /// published the marker. False while the request is active.
    public func touchSettledMarker(of id: String) -> Bool {
        switch state(of: id) {
        case .active: return false
        case .done: SharedFS.touch(layout.doneMarker(id))
        case .failed: SharedFS.touch(layout.failedMarker(id))
        }
        return true
    }
}
