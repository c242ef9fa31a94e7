// FileSelection - which files of a repo a call asks for: globs (where `*` crosses `/`) or literal paths.
import Foundation
import SharedFiles

public struct FileSelection: Sendable, Equatable, CustomStringConvertible {
    /// Patterns; empty means every file.
    public let patterns: [String]
    /// Patterns of files left out even when `patterns` select them (`--exclude`).
    public let excludes: [String]

    public init(_ patterns: [String] = [], excluding excludes: [String] = []) {
        self.patterns = patterns
        self.excludes = excludes
    }

    public static let all = FileSelection()

    public var isAll: Bool { patterns.isEmpty && excludes.isEmpty }

    public func matches(_ path: String) -> Bool {
        (patterns.isEmpty || patterns.contains { FileSelection.glob($0, matches: path) })
            && !excludes.contains { FileSelection.glob($0, matches: path) }
    }

    /// Patterns without wildcards: files the caller named exactly, which must exist.
    public var literalPaths: [String] { patterns.filter { !FileSelection.isPattern($0) } }

    public static func isPattern(_ s: String) -> Bool { s.contains { "*?[".contains($0) } }

    public var description: String {
        (patterns.isEmpty ? "all files" : patterns.joined(separator: ", "))
            + (excludes.isEmpty ? "" : " except \(excludes.joined(separator: ", "))")
    }

    /// What a pattern that matched nothing may have meant: the repo's paths and its extensions as
    /// `*.ext`, nearest first by edit distance to the pattern as typed (`*.gguf` → `*.json`,
    /// `*.safetensors`; a mistyped name → the real one).
    public static func nearest(to pattern: String, among paths: [String], limit: Int) -> [String] {
        var candidates = Set(paths)
        for path in paths {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            if let dot = name.lastIndex(of: "."), dot != name.startIndex { candidates.insert("*" + name[dot...]) }
        }
        let scored: [(path: String, distance: Int)] = candidates.map { candidate in
            (path: candidate, distance: editDistance(pattern.unicodeScalars, candidate.unicodeScalars))
        }
        let ranked = scored.sorted { a, b in a.distance != b.distance ? a.distance < b.distance : a.path < b.path }
        return ranked.prefix(limit).map { $0.path }
    }

    /// `*` and `**` match any run of characters including `/`; `?` one character; `[abc]` a class.
    public static func glob(_ pattern: String, matches text: String) -> Bool {
        let p = Array(pattern.unicodeScalars), t = Array(text.unicodeScalars)
        var pi = 0, ti = 0, starP = -1, starT = 0
        while ti < t.count {
            if pi < p.count, p[pi] == "*" {
                while pi < p.count, p[pi] == "*" { pi += 1 }
                starP = pi
                starT = ti
                continue
            }
            if pi < p.count, let step = matchOne(p, pi, t[ti]) {
                pi = step
                ti += 1
                continue
            }
            guard starP >= 0 else { return false }
            starT += 1
            ti = starT
            pi = starP
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    /// Matches one pattern element at `pi` against `c`; returns the next pattern index.
    private static func matchOne(_ p: [Unicode.Scalar], _ pi: Int, _ c: Unicode.Scalar) -> Int? {
        switch p[pi] {
        case "?": return pi + 1
        case "[":
            var i = pi + 1
            var negate = false
            if i < p.count, p[i] == "!" || p[i] == "^" { negate = true; i += 1 }
            var matched = false
            var first = true
            while i < p.count, p[i] != "]" || first {
                first = false
                if i + 2 < p.count, p[i + 1] == "-", p[i + 2] != "]" {
                    if p[i] <= c && c <= p[i + 2] { matched = true }
                    i += 3
                } else {
                    if p[i] == c { matched = true }
                    i += 1
                }
            }
            guard i < p.count else { return p[pi] == c ? pi + 1 : nil }  // unterminated: literal '['
            return matched != negate ? i + 1 : nil
        default:
            return p[pi] == c ? pi + 1 : nil
        }
    }
}
