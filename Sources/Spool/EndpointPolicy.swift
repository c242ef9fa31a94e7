// EndpointPolicy - which Hubs a daemon fetches a request's bytes from (docs/protocol.md,
// "Endpoints"). A caller resolves a commit against its own HF_ENDPOINT and records that URL in
// its request; a daemon fetches the request only from that Hub, and only when it may: the Hub it
// was started with, or one `speech-fetchd --allow-endpoint` names. Never from another Hub
// instead: the commit may not exist there, or be other bytes under the same name.
import Foundation
import SharedFiles

/// The Hubs one node's daemon fetches from.
public struct EndpointPolicy: Sendable, Equatable {
    /// The daemon's own `HF_ENDPOINT` (its URL, no trailing slash): the one its token goes to.
    public let own: String
    /// `--allow-endpoint`: other Hubs it fetches from for a request that names them, without a token.
    public let allowed: [String]

    public init(own: String, allowed: [String] = []) {
        self.own = own
        self.allowed = allowed.filter { $0 != own }
    }

    /// The environment variable that hands `--allow-endpoint` to a daemon's workers: URLs
    /// separated by spaces (a URL holds `:`, never a space).
    public static let allowedVariable = "SPEECH_FETCH_DAEMON_ALLOWED_ENDPOINTS"

    /// The allow-list in a daemon's environment.
    public static func allowed(in environment: [String: String]) -> [String] {
        (environment[allowedVariable] ?? "").split(separator: " ").map(String.init).filter { !$0.isEmpty }
    }

    /// True when a record naming `endpoint` may be fetched by this daemon (absent: its own Hub).
    public func allows(_ endpoint: String?) -> Bool {
        guard let endpoint else { return true }
        return endpoint == own || allowed.contains(endpoint)
    }

    /// Why the daemon does not fetch a request that names `endpoint`; nil when it does.
    public func refusal(repo: String, endpoint: String?) -> String? {
        guard let endpoint, !allows(endpoint) else { return nil }
        return "\(repo) was resolved against the Hub \(endpoint), and this speech-fetchd fetches only from \(own)"
            + (allowed.isEmpty ? "" : " and " + allowed.joined(separator: ", "))
            + ", so nothing was fetched for it (the commit may not exist on another Hub): ask again with HF_ENDPOINT=\(own), "
            + "or start speech-fetchd with --allow-endpoint \(endpoint); `speech download` without a daemon that allows it fetches in its own process"
    }

    // MARK: Published for callers

    /// `fetchd-<node>.endpoints`: the node's daemon's own Hub on the first line, then the ones it
    /// allows, so that a caller hands over only what that daemon will fetch from its Hub.
    public static func publishedPath(_ layout: SpoolLayout, node: String) -> String { layout.root + "/fetchd-\(node).endpoints" }

    /// Writes the list a caller reads (`published`).
    public func publish(in spool: Spool) {
        let temp = spool.tempPath("endpoints")
        guard (try? SpoolFS.writeNew(temp, Data(([own] + allowed).map { $0 + "\n" }.joined().utf8))) != nil else { return }
        if rename(temp, EndpointPolicy.publishedPath(spool.layout, node: spool.owner.node)) != 0 { unlink(temp) }
    }

    /// Removes the list when the daemon stops.
    public static func retract(in spool: Spool) { unlink(publishedPath(spool.layout, node: spool.owner.node)) }

    /// The Hubs this node's daemon fetches from, as it published them; nil when it published
    /// none (no daemon, or one that has not yet): a caller then cannot know and does not hand over.
    public static func published(by spool: Spool) -> EndpointPolicy? {
        guard let data = SharedFS.read(publishedPath(spool.layout, node: spool.owner.node), limit: 1 << 16).value else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        guard let own = lines.first else { return nil }
        return EndpointPolicy(own: own, allowed: Array(lines.dropFirst()))
    }
}
