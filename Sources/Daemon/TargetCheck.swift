// TargetCheck - a daemon serves a request only when its target lies where the daemon may write
// (RequestTargets: the cache base, the huggingface_hub caches it was given); any other request
// fails with a marker naming the target and what to do, so its caller does not wait.
import Foundation
import Spool

extension Spool {
    /// True when `request` may be planned here. A request this process refuses fails, unless it
    /// is another node's whose supervisor serves (that node's daemon judges it: every node's
    /// daemon should be given the same --hf-cache).
    func acceptsTarget(of request: SpoolRequest) -> Bool {
        guard let refusal = targets?.cachedRefusal(request) else { return true }
        if request.node != owner.node && supervisorServes(request.node, round: leaseRound()) { return false }
        markFailed(request.id, reason: "the request for \(request.repo) is refused: \(refusal)")
        return false
    }
}
