// SlotFetchers - one worker slot's connections, one per Hub it fetches from (EndpointPolicy):
// its own Hub's, with the node's credential, and one per `--allow-endpoint` Hub a request named,
// made at its first job, without a token (the node's credential is for its own Hub only).
import Foundation
import HubClient
import Transfer

final class SlotFetchers: @unchecked Sendable {
    /// The daemon's own Hub's fetcher.
    let own: RangeFetch
    /// Fetchers of other allowed Hubs, by URL. Only the slot's thread uses them: no lock.
    private var others: [String: RangeFetch] = [:]

    init(own: RangeFetch) { self.own = own }

    /// The fetcher for a plan resolved against `endpoint` (absent: the daemon's own Hub). The
    /// claim already checked that the daemon allows it.
    func fetcher(for endpoint: String?) throws -> RangeFetch {
        guard let endpoint, endpoint != own.client.endpoint.url else { return own }
        if let known = others[endpoint] { return known }
        guard let hub = HubEndpoint(endpoint) else { throw HubError.badResponse(url: endpoint, reason: "a request names this as its Hub, which is not an http(s) URL") }
        let client = HubClient(endpoint: hub, token: nil, retry: own.client.retry, stallTimeout: own.client.stallTimeout)
        let made = try RangeFetch(client: client, settings: own.settings)
        others[endpoint] = made
        return made
    }
}
