// FailureRecord - what a `failed/` or `failures/` marker holds: a failure's kind and its reason
// (docs/protocol.md, "The spool").
import Foundation

/// A failure as the spool records it: its kind, for programs, and its reason, for people.
public struct FailureRecord: Sendable, Equatable {
    public let kind: FailureKind
    public let reason: String

    public init(_ kind: FailureKind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// The record a failed file gives its request: the same kind, the reason naming the file.
    public func of(file path: String) -> FailureRecord { FailureRecord(kind, "\(path): \(reason)") }

    /// `{"reason": …, "kind": …}`.
    var json: Data {
        (try? JSONSerialization.data(withJSONObject: ["reason": reason, "kind": kind.rawValue])) ?? Data()
    }

    /// What an empty record says: its writer found no room for the reason (`Spool.publishMarker`).
    static let noRoomToRecord = FailureRecord(.diskFull, "the disk holding the spool is full (no room was left to record the reason)")

    /// A record's contents; nil when it is not an object with a string `reason` (corrupt). An
    /// empty record is a failure recorded on a full disk.
    static func decode(_ data: Data) -> FailureRecord? {
        if data.isEmpty { return noRoomToRecord }
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
              let reason = object["reason"] as? String else { return nil }
        return FailureRecord(FailureKind(recorded: object["kind"] as? String), reason)
    }
}
