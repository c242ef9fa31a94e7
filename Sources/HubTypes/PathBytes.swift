// PathBytes - a repo path compared as its bytes.
import Foundation

/// A repo path as the key of a set or dictionary, equal only to the same UTF-8 bytes.
///
/// Swift's `String` equality takes canonically equivalent spellings for one string (`é` as one
/// scalar, NFC, or as `e` and a combining accent, NFD), while the Hub, git, huggingface_hub and
/// the disk hold them as two files. Every identity of a repo path on the download path (the
/// listing's duplicate check, the selection, what is current, what is missing) is judged on bytes.
public struct PathBytes: Hashable, Sendable {
    public let bytes: [UInt8]
    public init(_ path: String) { bytes = Array(path.utf8) }
}

extension String {
    /// Whether two repo paths name the same file: the same bytes, not canonically equal strings.
    public func isSamePath(as other: String) -> Bool { utf8.elementsEqual(other.utf8) }
}
