// TerminalText - a name from the Hub made safe to print as text.
import Foundation

/// File names come from the Hub, and a name may hold terminal escapes (`\u{1B}[2J`, a window
/// title, a hyperlink) or bidirectional overrides that make it read as another name. Printed as
/// text (to a terminal or not: piped output is read on a terminal too, with `less` or `cat`),
/// every control character (C0, DEL, C1) is shown as `\xHH` and every bidirectional control as
/// `\u{HHHH}`. A repo path never holds a backslash (RepoPath refuses it), so an escape cannot be
/// mistaken for a name's own characters. `--json` carries names as they are: JSON escapes
/// control characters itself.
enum TerminalText {
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if !needsEscape(scalar) {
                out.unicodeScalars.append(scalar)
            } else if scalar.value < 0x100 {
                out += String(format: "\\x%02X", scalar.value)
            } else {
                out += String(format: "\\u{%04X}", scalar.value)
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true  // C0, DEL, C1
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true  // bidirectional marks and overrides
        default: return false
        }
    }
}
