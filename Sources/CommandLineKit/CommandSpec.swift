// CommandSpec - what one program or subcommand accepts: its options, how many operands, its help.
// The one argument parser of speech, speech-fetchd and speech-testhub (docs/cli.md).
import Foundation
import SharedFiles

/// One option of a command: a flag (`--offline`) or an option with a value (`--revision R`).
public struct Option: Sendable {
    /// The long name without dashes (`cache-base`).
    public let name: String
    /// What the value is called in help (`DIR`); nil for a flag.
    public let value: String?
    /// A one-letter alias (`-q` for `--quiet`).
    public let short: Character?
    /// One line for the help.
    public let help: String
    /// The value may be left out (`--hf-cache` alone gives ""): then only `--name=VALUE`, or a
    /// next word that is a path (`/…`, `./…`, `../…`, `~…`), is taken as the value, so that
    /// a following operand is never swallowed.
    public var valueIsOptional = false
    /// Other long names that mean this option (`local-dir`, `hf download`'s name for `cache-dir`).
    public var aliases: [String] = []

    /// The same option, also accepted as `--alias` for each alias.
    public func alias(_ names: String...) -> Option {
        var copy = self
        copy.aliases += names
        return copy
    }

    public static func flag(_ name: String, short: Character? = nil, _ help: String) -> Option {
        Option(name: name, value: nil, short: short, help: help)
    }

    public static func value(_ name: String, _ value: String, short: Character? = nil, _ help: String) -> Option {
        Option(name: name, value: value, short: short, help: help)
    }

    public static func optionalValue(_ name: String, _ value: String, _ help: String) -> Option {
        Option(name: name, value: value, short: nil, help: help, valueIsOptional: true)
    }
}

/// A program's or subcommand's command line.
public struct CommandSpec: Sendable {
    /// The words that run it (`speech download`).
    public let name: String
    /// Operands in the synopsis (`<org/name | model> [FILE]...`).
    public let operands: String
    /// What it does, in a sentence or two.
    public let summary: String
    public let options: [Option]
    /// Fewest and most operands (nil: no upper bound).
    public let minOperands: Int
    public let maxOperands: Int?
    /// Text after the options (environment, exit codes, examples).
    public let epilogue: String
    /// What to say about an unknown option that users of another tool type (`max-workers` →
    /// the setting that does that here), keyed by its long name without dashes.
    public let optionHints: [String: String]

    public init(name: String, operands: String = "", summary: String, options: [Option] = [],
                minOperands: Int = 0, maxOperands: Int? = 0, epilogue: String = "", optionHints: [String: String] = [:]) {
        self.optionHints = optionHints
        self.name = name
        self.operands = operands
        self.summary = summary
        self.options = options
        self.minOperands = minOperands
        self.maxOperands = maxOperands
        self.epilogue = epilogue
    }

    /// `-h`/`--help`: synopsis, summary, one line per option.
    public var help: String {
        var out = "usage: \(name)" + (operands.isEmpty ? "" : " \(operands)") + (options.isEmpty ? "" : " [options]") + "\n\n"
        out += summary + "\n"
        let all = options + [.flag("help", short: "h", "show this help"), .flag("version", "print the version, commit and libcurl version")]
        let labels = all.map { o -> String in
            (o.short.map { "-\($0), " } ?? "    ") + "--\(o.name)" + (o.value.map { o.valueIsOptional ? " [\($0)]" : " \($0)" } ?? "")
        }
        let width = min(30, labels.map(\.count).max() ?? 0)
        out += "\noptions:\n"
        for (label, option) in zip(labels, all) {
            let pad = label.count <= width ? String(repeating: " ", count: width - label.count) : "\n" + String(repeating: " ", count: width + 2)
            out += "  \(label)\(pad)  \(option.help)\n"
        }
        if !epilogue.isEmpty { out += "\n" + epilogue + (epilogue.hasSuffix("\n") ? "" : "\n") }
        return out
    }

    /// "; did you mean --cache-dir?" for a near miss of a known option (or the spec's own hint
    /// for a name another tool uses), "" when nothing is near.
    func hint(forUnknown name: String) -> String {
        if let hint = optionHints[name] { return "; \(hint)" }
        let known = options.flatMap { [$0.name] + $0.aliases } + ["help", "version"]
        let typed = name.lowercased().replacingOccurrences(of: "_", with: "-")
        if known.contains(typed) { return "; did you mean --\(typed)?" }
        guard let best = CommandSpec.nearest(to: typed, among: known) else { return "" }
        return "; did you mean --\(best)?"
    }

    /// The name of `known` nearest to `typed` when it is near enough to be a typo (a few edits,
    /// or `typed` a prefix of three characters or more); nil when none is. The command line's
    /// one "did you mean" rule: options, catalog model names.
    public static func nearest(to typed: String, among known: [String]) -> String? {
        known.map { ($0, editDistance(typed, $0)) }
            .filter { $0.1 <= max(1, min(3, $0.0.count / 3)) || ($0.0.hasPrefix(typed) && typed.count >= 3) }
            .min { $0.1 < $1.1 }?.0
    }

    /// What a command line asks for.
    public enum Outcome {
        case run(ParsedArguments)
        case help
        case version
    }

    /// Parses the words after the command's name. `--name value`, `--name=value`, `-x value`,
    /// flags, operands, and `--` (everything after it is an operand).
    /// - Throws: `UsageError` for an unknown option, a missing value, a value given to a flag,
    ///   or too few or too many operands.
    public func parse(_ words: [String]) throws -> Outcome {
        var parsed = ParsedArguments()
        var i = 0
        func option(named name: String) -> Option? { options.first { $0.name == name || $0.aliases.contains(name) } }
        while i < words.count {
            let word = words[i]
            i += 1
            if word == "--" {
                parsed.operands += words[i...]
                break
            }
            if word == "-h" || word == "--help" { return .help }
            if word == "--version" { return .version }
            var found: Option?
            var inline: String?
            if word.hasPrefix("--") {
                var name = String(word.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                guard let o = option(named: name) else { throw UsageError("\(self.name): unknown option --\(name)" + hint(forUnknown: name)) }
                found = o
            } else if word.hasPrefix("-"), word.count > 1 {
                let letters = Array(word.dropFirst())
                guard let o = options.first(where: { $0.short != nil && $0.short == letters[0] }) else {
                    throw UsageError("\(name): unknown option \(word)")
                }
                if letters.count > 1 {
                    guard o.value != nil else { throw UsageError("\(name): unknown option \(word)") }
                    inline = String(letters.dropFirst())
                }
                found = o
            } else {
                parsed.operands.append(word)
                continue
            }
            guard let o = found else { continue }
            if o.value == nil {
                if inline != nil { throw UsageError("\(name): --\(o.name) takes no value") }
                parsed.flags.insert(o.name)
            } else {
                if inline == nil && o.valueIsOptional {
                    // The next word is the value when it reads as a path (`/`, `./`, `../`, `~`),
                    // names a directory that exists (`relative/dir`), or cannot be an operand
                    // (the command takes no more); else it is an operand and the value is left
                    // out (`org/x --hf-cache config.json`). `--hf-cache=DIR` is always the value.
                    let next = i < words.count ? words[i] : ""
                    var isDirectory: ObjCBool = false
                    let operandsFull = maxOperands.map { parsed.operands.count >= $0 } ?? false
                    if ["/", "./", "../", "~"].contains(where: { next.hasPrefix($0) })
                        || (!next.isEmpty && !next.hasPrefix("-")
                            && (operandsFull || (FileManager.default.fileExists(atPath: next, isDirectory: &isDirectory) && isDirectory.boolValue))) {
                        inline = next
                        i += 1
                    } else {
                        inline = ""
                    }
                }
                if inline == nil {
                    guard i < words.count else { throw UsageError("\(name): --\(o.name) needs a value (\(o.value!))") }
                    inline = words[i]
                    i += 1
                }
                // An empty value (`--cache-dir ''`, an unset shell variable) would silently mean
                // "here" or "none"; no option takes one (an optional value is "" when left out).
                if inline!.isEmpty && !o.valueIsOptional {
                    throw UsageError("\(name): --\(o.name) needs a value, not an empty string")
                }
                parsed.values[o.name, default: []].append(inline!)
            }
        }
        if parsed.operands.count < minOperands {
            throw UsageError("\(name): missing \(operands.isEmpty ? "operand" : operands)")
        }
        if let most = maxOperands, parsed.operands.count > most {
            let extra = parsed.operands[most...].joined(separator: " ")
            throw UsageError("\(name): unexpected argument\(parsed.operands.count - most > 1 ? "s" : "") \(extra)")
        }
        return .run(parsed)
    }
}

/// The parsed words of one command line.
public struct ParsedArguments: Sendable {
    public internal(set) var operands: [String] = []
    var values: [String: [String]] = [:]
    var flags: Set<String> = []

    /// The last value given for an option.
    public func value(_ name: String) -> String? { values[name]?.last }
    /// Every value given for a repeatable option, in order.
    public func values(_ name: String) -> [String] { values[name] ?? [] }
    public func flag(_ name: String) -> Bool { flags.contains(name) }
    /// Names of the options given, flags included.
    public var given: Set<String> { Set(values.keys).union(flags) }
}

/// A command line that cannot be run as written: exit 64 with this one line.
public struct UsageError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ message: String) { description = message }
}
