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
            throw RepoError.invalidRepoID(raw, reason: "expected the form org/name, e.g. aufklarer/Kokoro-82M-CoreML")
        }
        for part in parts {
            if let reason = RepoID.problem(with: part) { throw RepoError.invalidRepoID(raw, reason: reason) }
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
    /// The most components (folders and the file) a path may have: what `maxLength` allows
    /// (one byte and a slash each). Walks of a model directory go no deeper.
    public static let maxDepth = maxLength / 2

    /// Returns the path when it is a safe relative path, else throws `RepoError.unsafePath`.
    /// Judged on the UTF-8 bytes the filesystem sees, not on Swift's characters: a combining
    /// mark after a slash (`../\u{301}x`) makes `/\u{301}` one character, which hid the `..`
    /// component from a character-level split while the kernel still walks it.
    @discardableResult
    public static func validate(_ path: String, in repo: RepoID) throws -> String {
        func refuse(_ reason: String) -> RepoError { .unsafePath(path, repo: repo, reason: reason) }
        let bytes = Array(path.utf8)
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        if bytes.isEmpty { throw refuse("it is empty") }
        if bytes.count > maxLength { throw refuse("it is longer than \(maxLength) bytes") }
        if bytes.contains(0) { throw refuse("it contains a NUL byte") }
        if bytes[0] == slash { throw refuse("it is absolute") }
        if bytes.contains(UInt8(ascii: "\\")) { throw refuse("it contains a backslash") }
        let components = bytes.split(separator: slash, omittingEmptySubsequences: false)
        if components.count > maxDepth { throw refuse("it is more than \(maxDepth) folders deep") }
        for component in components {
            if component.isEmpty { throw refuse("it has an empty component") }
            if component.elementsEqual([dot]) || component.elementsEqual([dot, dot]) {
                throw refuse("it has a '\(String(decoding: component, as: UTF8.self))' component")
            }
            if component.count > 255 { throw refuse("a component is longer than 255 bytes") }
        }
        func starts(_ prefix: String) -> Bool { bytes.starts(with: prefix.utf8) }
        if bytes.elementsEqual(".incomplete".utf8) || starts(".incomplete/") || starts(".speech-fetch") {
            throw refuse("it names the cache's own bookkeeping")
        }
        return path
    }
}
