// CommandArguments - the command lines' small parser: `--name value`, `--name=value`, flags, positionals.
import Foundation

/// Parsed arguments of one command (the words after the command name).
public struct Arguments {
    public private(set) var positionals: [String] = []
    private var options: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// Parses `raw` given which options take a value; anything else starting with `--` is a flag.
    /// An option in `optionalValue` takes `=value`, or the next word when it is not an option and
    /// a positional came before (`download org/name --hf-cache DIR`); without one its value is "".
    public init(_ raw: [String], valued: Set<String>, flags knownFlags: Set<String>, optionalValue: Set<String> = []) throws {
        var i = 0
        while i < raw.count {
            let arg = raw[i]
            if arg == "--" {
                positionals += raw[(i + 1)...]
                break
            }
            if arg.hasPrefix("--") {
                var name = String(arg.dropFirst(2))
                var value: String?
                if let eq = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if valued.contains(name) {
                    if value == nil {
                        i += 1
                        guard i < raw.count else { throw UsageError("--\(name) needs a value") }
                        value = raw[i]
                    }
                    // An empty value (`--cache-dir ''`, an unset shell variable) would silently
                    // mean "here" or "none"; no option of ours takes one.
                    guard !value!.isEmpty else { throw UsageError("--\(name) needs a value, not an empty string") }
                    options[name, default: []].append(value!)
                } else if optionalValue.contains(name) {
                    if value == nil, i + 1 < raw.count, !raw[i + 1].hasPrefix("-"), !positionals.isEmpty {
                        i += 1
                        value = raw[i]
                    }
                    options[name, default: []].append(value ?? "")
                } else if knownFlags.contains(name), value == nil {
                    flags.insert(name)
                } else {
                    throw UsageError("unknown option --\(name)")
                }
            } else {
                positionals.append(arg)
            }
            i += 1
        }
    }

    public func value(_ name: String) -> String? { options[name]?.last }
    public func values(_ name: String) -> [String] { options[name] ?? [] }
    public func flag(_ name: String) -> Bool { flags.contains(name) }
    /// Names of the options given (flags included).
    public var given: Set<String> { Set(options.keys).union(flags) }
}

/// A command line that cannot be run as written.
public struct UsageError: Error, CustomStringConvertible {
    public let description: String
    public init(_ message: String) { description = message }
}
