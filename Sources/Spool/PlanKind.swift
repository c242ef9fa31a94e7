// PlanKind - how a planned file's jobs are fetched: a plan's `kind` field (docs/protocol.md).

/// The kind of a plan's jobs; a plan without one is split into byte ranges of the file.
public enum PlanKind: String, Codable, Sendable {
    /// One job for a whole Xet-backed file: its claimant fetches the file's xorb ranges natively
    /// into the staging file, verifies and finalizes it (docs/xet.md, "Under the daemon"). A
    /// value this version does not know makes the plan unreadable (set aside in `corrupt/`),
    /// never fetched as ranges.
    case xet
}
