// MissingFiles - what a call needs that the cache lacks, as an offline check finds it and as
// `CacheError.cacheMiss` and `DownloadError.hubUnreachable` carry it.

/// What a call needs that the cache lacks: the repo's files, when nothing of it is on disk and no
/// listing names them (`anyFile`), or these repo paths and patterns, sorted (`named`; none when
/// nothing lacks). A caller decides by the case, never by the words of a list.
public enum MissingFiles: Sendable, Equatable, ExpressibleByArrayLiteral {
    case anyFile
    case named([String])

    public init(arrayLiteral paths: String...) { self = .named(paths) }

    /// True when nothing lacks.
    public var isEmpty: Bool { self == .named([]) }

    /// The named repo paths and patterns (none for `anyFile`).
    public var paths: [String] {
        if case .named(let paths) = self { return paths }
        return []
    }

    /// As a list shows them (`speech cache ls`): the named paths, or the one entry "(any file)".
    public var entries: [String] {
        switch self {
        case .anyFile: return ["(any file)"]
        case .named(let paths): return paths
        }
    }

    /// These and `path` too (nothing of the repo stays nothing of the repo).
    public func adding(_ path: String) -> MissingFiles {
        switch self {
        case .anyFile: return .anyFile
        case .named(let paths): return .named(paths + [path])
        }
    }

    /// As a message says it: "nothing of it is in the cache", or "missing: a, b" (the first ten,
    /// then how many in all).
    public var listed: String {
        switch self {
        case .anyFile:
            return "nothing of it is in the cache"
        case .named(let paths):
            return "missing: " + paths.prefix(10).joined(separator: ", ") + (paths.count > 10 ? ", … (\(paths.count) in all)" : "")
        }
    }
}
