// HubScenario - a whole test set-up as data: faults per file, gated and private repos,
// and the LFS oid style. speech-testhub reads it from its --faults file (docs/testhub.md).
import Foundation

/// Faults and access rules to put on a running `TestHub`, readable from JSON.
public struct HubScenario: Sendable, Codable, Equatable {
    /// One fault on one file: the JSON object of the fault with a `file` key beside its `type`.
    public struct FileFault: Sendable, Codable, Equatable {
        /// "<org>/<name>/<path in repo>".
        public var file: String
        public var fault: Fault

        public init(file: String, fault: Fault) {
            self.file = file
            self.fault = fault
        }

        private enum CodingKeys: String, CodingKey { case file }

        public init(from decoder: Decoder) throws {
            file = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .file)
            fault = try Fault(from: decoder)
        }

        public func encode(to encoder: Encoder) throws {
            try fault.encode(to: encoder)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(file, forKey: .file)
        }
    }

    public var faults: [FileFault]
    /// Repo → the token that opens it.
    public var gated: [String: String]
    /// Repo → the token that opens it.
    public var `private`: [String: String]
    public var lfsOidPrefix: Bool?
    public var treePageSize: Int?
    /// Every LFS file of every repo through Xet (as `--xet`).
    public var xet: Bool?
    /// These repos' LFS files through Xet.
    public var xetRepos: [String]
    /// Seconds a Xet access token is valid.
    public var xetTokenLifetime: Double?

    public init(faults: [FileFault] = [], gated: [String: String] = [:], private: [String: String] = [:],
                lfsOidPrefix: Bool? = nil, treePageSize: Int? = nil, xet: Bool? = nil, xetRepos: [String] = [],
                xetTokenLifetime: Double? = nil) {
        self.faults = faults
        self.gated = gated
        self.private = `private`
        self.lfsOidPrefix = lfsOidPrefix
        self.treePageSize = treePageSize
        self.xet = xet
        self.xetRepos = xetRepos
        self.xetTokenLifetime = xetTokenLifetime
    }

    private enum CodingKeys: String, CodingKey {
        case faults, gated, `private`, lfsOidPrefix, treePageSize, xet, xetRepos, xetTokenLifetime
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        faults = try c.decodeIfPresent([FileFault].self, forKey: .faults) ?? []
        gated = try c.decodeIfPresent([String: String].self, forKey: .gated) ?? [:]
        `private` = try c.decodeIfPresent([String: String].self, forKey: .private) ?? [:]
        lfsOidPrefix = try c.decodeIfPresent(Bool.self, forKey: .lfsOidPrefix)
        treePageSize = try c.decodeIfPresent(Int.self, forKey: .treePageSize)
        xet = try c.decodeIfPresent(Bool.self, forKey: .xet)
        xetRepos = try c.decodeIfPresent([String].self, forKey: .xetRepos) ?? []
        xetTokenLifetime = try c.decodeIfPresent(Double.self, forKey: .xetTokenLifetime)
    }

    /// Reads a scenario from JSON text.
    public static func decode(_ data: Data) throws -> HubScenario {
        try JSONDecoder().decode(HubScenario.self, from: data)
    }

    /// Puts every fault and access rule on `hub` (faults add to those already set).
    public func apply(to hub: TestHub) {
        for entry in faults { hub.setFault(entry.fault, for: entry.file) }
        for (repo, token) in gated { hub.setGated(repo, token: token) }
        for (repo, token) in `private` { hub.setPrivateToken(repo, token: token) }
        if let lfsOidPrefix { hub.lfsOidPrefix = lfsOidPrefix }
        if let treePageSize { hub.treePageSize = treePageSize }
        if let xet { hub.xetEverywhere = xet }
        for repo in xetRepos { hub.setXet(repo) }
        if let xetTokenLifetime { hub.xetTokenLifetime = xetTokenLifetime }
    }
}
