// MetricsPage - one page in the Prometheus text exposition format (version 0.0.4), as
// `speech-fetchd --metrics` serves it (DaemonMetrics.swift fills it).

/// A page in the Prometheus text exposition format: each family's HELP and TYPE, then its samples.
struct MetricsPage {
    private(set) var text = ""

    mutating func add(_ name: String, type: String, help: String, _ samples: [([(String, String)], Double)]) {
        text += "# HELP \(name) \(MetricsPage.escape(help, quotes: false))\n"
        text += "# TYPE \(name) \(type)\n"
        for (labels, value) in samples {
            let rendered = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(MetricsPage.escape($0.1))\"" }.joined(separator: ",") + "}"
            text += "\(name)\(rendered) \(MetricsPage.number(value))\n"
        }
    }

    /// A label value: backslash, double quote and newline escaped (a HELP text: the quote not).
    /// Most values need nothing, and are returned as they are without a copy.
    static func escape(_ value: String, quotes: Bool = true) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\n") || (quotes && $0 == UInt8(ascii: "\"")) }) else {
            return value
        }
        var escaped = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\"" where quotes: escaped += "\\\""
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
