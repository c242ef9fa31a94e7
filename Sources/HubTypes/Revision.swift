// Revision - a branch, tag or commit id as a caller names it: the one rule of what may be sent to
// the Hub as a revision and may name a `refs/` file of a huggingface_hub cache.
import Foundation

/// A revision checked by the one rule (`problem(with:)`).
public struct Revision: Sendable, Hashable, CustomStringConvertible {
    public let name: String

    public var description: String { name }

    /// nil when `raw` breaks the rule (`problem(with:)` says why).
    public init?(_ raw: String) {
        guard Revision.problem(with: raw) == nil else { return nil }
        name = raw
    }

    /// Why `raw` cannot name a branch, tag or commit; nil when it can. Refused: empty, longer
    /// than 256 bytes, a space or control character, `..` anywhere, an empty component or one
    /// that starts with `.` (`refs/../x`, `.`: URL normalization would turn them into another
    /// path, so `main` would be used silently, and as a `refs/` file they would lead out of the
    /// folder). Git's ref names cannot hold any of these. Everything else is sent
    /// percent-encoded as one path segment (`refs/pr/1` → `refs%2Fpr%2F1`).
    public static func problem(with raw: String) -> String? {
        if raw.isEmpty { return "it is empty" }
        if raw.utf8.count > 256 { return "it is longer than 256 bytes" }
        if raw.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }) {
            return "it contains a space or a control character"
        }
        if raw.contains("..") { return "it contains '..'" }
        for component in raw.split(separator: "/", omittingEmptySubsequences: false) {
            if component.isEmpty { return "it has an empty component" }
            if component.hasPrefix(".") { return "a component starts with '.'" }
        }
        return nil
    }
}
