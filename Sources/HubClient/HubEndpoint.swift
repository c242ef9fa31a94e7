// HubEndpoint - which Hub (or mirror) to talk to, from HF_ENDPOINT.
import Foundation

/// The base URL of the Hub: `https://huggingface.co` unless `HF_ENDPOINT` names a valid mirror.
public struct HubEndpoint: Sendable, Equatable, CustomStringConvertible {
    public static let defaultURL = "https://huggingface.co"

    /// Scheme, host, optional port and optional path prefix, without a trailing slash.
    public let url: String
    public let scheme: String
    public let host: String
    public let port: Int

    /// Parses an endpoint; nil unless it is an absolute http(s) URL with a host.
    public init?(_ raw: String) {
        var text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        while text.hasSuffix("/") { text.removeLast() }
        guard !text.isEmpty, let parts = URLComponents(string: text),
              let scheme = parts.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = parts.host, !host.isEmpty,
              parts.query == nil, parts.fragment == nil, parts.user == nil
        else { return nil }
        self.url = text
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = parts.port ?? (scheme == "https" ? 443 : 80)
    }

    /// The endpoint from `HF_ENDPOINT`; a blank or malformed value is ignored (the default is used).
    public static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> HubEndpoint {
        if let raw = env["HF_ENDPOINT"], let endpoint = HubEndpoint(raw) { return endpoint }
        return HubEndpoint(defaultURL)!
    }

    /// Why `HF_ENDPOINT` was ignored, for a warning; nil when it is unset or valid.
    public static func ignoredValueWarning(_ env: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        guard let raw = env["HF_ENDPOINT"], !raw.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
              HubEndpoint(raw) == nil else { return nil }
        return "HF_ENDPOINT=\(raw) is not a full http(s)://host URL; using \(defaultURL)"
    }

    /// True when `url` is on this endpoint's scheme, host and port: only such URLs may carry the token.
    public func isSameOrigin(_ url: String) -> Bool {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(),
              let host = parts.host?.lowercased() else { return false }
        let port = parts.port ?? (scheme == "https" ? 443 : 80)
        return scheme == self.scheme && host == self.host && port == self.port
    }

    public var description: String { url }
}
