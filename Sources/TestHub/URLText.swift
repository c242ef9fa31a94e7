// URLText - percent-encoding the way the Hub's URLs use it: one path segment or one
// query value at a time, so a `/` inside a revision or a file name survives the trip.
import Foundation

enum URLText {
    /// Decodes `%XX` escapes (and `+` as a space in query text). Malformed escapes stay as written.
    static func decode<S: StringProtocol>(_ text: S, plusIsSpace: Bool = false) -> String {
        let bytes = Array(text.utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "%"), i + 2 < bytes.count,
               let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) {
                out.append(hi << 4 | lo)
                i += 3
                continue
            }
            out.append(plusIsSpace && b == UInt8(ascii: "+") ? UInt8(ascii: " ") : b)
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes one path segment or query value: only RFC 3986 unreserved characters stay bare.
    static func encodeComponent(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for b in text.utf8 {
            if isUnreserved(b) {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + String(b, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// Encodes a repo path segment by segment, keeping its slashes.
    static func encodePath(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false)
            .map { encodeComponent(String($0)) }
            .joined(separator: "/")
    }

    /// Splits `a=1&b=2` into decoded pairs, in order; a name without `=` gets an empty value.
    static func parseQuery(_ query: Substring) -> [(name: String, value: String)] {
        query.split(separator: "&").map { pair in
            if let eq = pair.firstIndex(of: "=") {
                return (decode(pair[..<eq], plusIsSpace: true), decode(pair[pair.index(after: eq)...], plusIsSpace: true))
            }
            return (decode(pair, plusIsSpace: true), "")
        }
    }

    private static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
