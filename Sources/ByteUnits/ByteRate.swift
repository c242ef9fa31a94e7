// ByteRate - a bandwidth or a size as curl's --limit-rate and aria2's --max-download-limit write it,
// for `--max-rate` (Transfer's RateCap enforces it) and `--max-cache-size`. A module of its own below
// Transfer and CommandLineKit, so that the command lines parse these without linking the HTTP stack.
import Foundation

/// A rate in bytes per second as the peers write it: `20M`, `500K`, `1.5M`, `2G`, or plain
/// bytes (`65536`); K, M and G are 1024-based (curl's `--limit-rate`, aria2's
/// `--max-download-limit`), upper or lower case.
public enum ByteRate {
    /// The rate `text` names, or nil when it is not one (the caller says what was wrong).
    public static func parse(_ text: String) -> Int64? {
        var digits = text.trimmingCharacters(in: .whitespaces)
        var unit: Double = 1
        switch digits.last.map({ Character($0.lowercased()) }) {
        case "k": unit = 1024
        case "m": unit = 1024 * 1024
        case "g": unit = 1024 * 1024 * 1024
        default: break
        }
        if unit > 1 { digits.removeLast() }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              digits.filter({ $0 == "." }).count <= 1, digits.first != ".", digits.last != ".",
              let value = Double(digits), value.isFinite else { return nil }
        let bytes = value * unit
        guard bytes >= 1, bytes < Double(Int64.max / 2) else { return nil }
        return Int64(bytes.rounded())
    }
}
