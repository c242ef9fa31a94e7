// TargetCheck - a daemon serves a request only when its target lies where the daemon may write
// (RequestTargets: the cache base, the huggingface_hub caches it was given) and its Hub is one
// the daemon fetches from (EndpointPolicy); any other request fails with a marker naming the
// target or Hub and what to do, so its caller does not wait.
import Foundation
import HubClient
import Spool

extension Spool {
    /// True when `request` may be planned here. A request this process refuses fails, unless it
    /// is another node's whose supervisor serves (that node's daemon judges it: every node's
    /// daemon should be given the same --hf-cache).
    func acceptsTarget(of request: SpoolRequest) -> Bool {
        guard let refusal = targetRefusal(of: request) else { return true }
        if request.node != owner.node && supervisorServes(request.node, round: leaseRound()) { return false }
        markFailed(request.id, FailureRecord(.refused, "the request for \(request.repo) is refused: \(refusal)"))
        return false
    }
}

extension Spool {
    /// Why this daemon does not serve `request` (its target, or its Hub); nil when it does. The
    /// log says "refused" rather than "accepted" for such a request.
    func targetRefusal(of request: SpoolRequest) -> String? {
        targets?.cachedRefusal(request) ?? endpoints?.refusal(repo: request.repo, endpoint: request.endpoint)
    }
}

extension EndpointPolicy {
    /// The policy of a daemon run with `environment`: its `HF_ENDPOINT`, and the Hubs
    /// `--allow-endpoint` named (handed to its workers in `EndpointPolicy.allowedVariable`).
    static func daemon(environment: [String: String]) -> EndpointPolicy {
        EndpointPolicy(own: HubEndpoint.fromEnvironment(environment).url, allowed: EndpointPolicy.allowed(in: environment))
    }
}
