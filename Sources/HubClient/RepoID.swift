// RepoID - a validated `org/name` model repository id.
import Foundation

/// A model repository on the Hub, `org/name`. Validated so it can name a cache directory safely.
public struct RepoID: Sendable, Hashable, CustomStringConvertible {
    public let org: String
    public let name: String

    public var description: String { "\(org)/\(name)" }

    public init(_ raw: String) throws {
        let parts = raw.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else {
            throw HubError.invalidRepoID(raw, reason: "expected the form org/name, e.g. aufklarer/Kokoro-82M-CoreML")
        }
        for part in parts {
            if let reason = RepoID.problem(with: part) { throw HubError.invalidRepoID(raw, reason: reason) }
        }
        org = parts[0]
        name = parts[1]
    }

    private static func problem(with part: String) -> String? {
        if part.isEmpty { return "an empty org or name" }
        if part.count > 96 { return "'\(part)' is longer than 96 characters" }
        if part == "." || part == ".." || part.hasPrefix(".") { return "'\(part)' may not start with '.'" }
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        if part.unicodeScalars.contains(where: { !allowed.contains($0) }) {
            return "'\(part)' may only use letters, digits, '-', '_' and '.'"
        }
        if part.contains("--") || part.contains("..") { return "'\(part)' may not contain '--' or '..'" }
        return nil
    }
}

/// Server-supplied file paths, checked before they touch the filesystem.
public enum RepoPath {
    public static let maxLength = 1024

    /// Returns the path when it is a safe relative path, else throws `HubError.unsafePath`.
    @discardableResult
    public static func validate(_ path: String, in repo: RepoID) throws -> String {
        func refuse(_ reason: String) -> HubError { .unsafePath(path, repo: repo, reason: reason) }
        if path.isEmpty { throw refuse("it is empty") }
        if path.utf8.count > maxLength { throw refuse("it is longer than \(maxLength) bytes") }
        if path.utf8.contains(0) { throw refuse("it contains a NUL byte") }
        if path.hasPrefix("/") { throw refuse("it is absolute") }
        if path.contains("\\") { throw refuse("it contains a backslash") }
        for component in path.split(separator: "/", omittingEmptySubsequences: false) {
            if component.isEmpty { throw refuse("it has an empty component") }
            if component == "." || component == ".." { throw refuse("it has a '\(component)' component") }
            if component.utf8.count > 255 { throw refuse("a component is longer than 255 bytes") }
        }
        if path == ".incomplete" || path.hasPrefix(".incomplete/") || path.hasPrefix(".speech-fetch") {
            throw refuse("it names the cache's own bookkeeping")
        }
        return path
    }
}
