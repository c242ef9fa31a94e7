// RangeResponse - whether an answer's body may be written where a request meant to put it.
import Curl
import Foundation

/// Why an attempt was stopped by our own checks, before (or while) its body was written.
enum RangeRefusal {
    case redirect(String)
    case rangeIgnored
    case expiredLocation
    case badRange(String)
    case changedOnServer(String)
    case write(Error)
    case overflow
}

public enum RangeResponse {
    enum Verdict {
        /// Write the body; it carries this ETag (nil when none was sent).
        case stream(etag: String?)
        /// Do not write; stop the request for this reason.
        case refuse(RangeRefusal)
        /// An error answer: keep its small body for the message.
        case errorBody
    }

    /// Judges a response to a GET of bytes `from...end` of a `size`-byte file from `url`
    /// (`ranged`: a Range header was sent). A 206 must match the asked range exactly; a 200 is
    /// only accepted for the whole file from byte 0, never written at an offset.
    static func verdict(status: Int, headers: HTTPHeaders, url: String, from: Int64, end: Int64, size: Int64,
                        ranged: Bool, isHubOrigin: Bool) -> Verdict {
        let etag = headers["ETag"].map { $0.hasPrefix("W/") ? String($0.dropFirst(2)) : $0 }
        switch status {
        case 206 where ranged:
            guard let got = parseContentRange(headers["Content-Range"]),
                  got.start == from, got.end == end, got.total == nil || got.total == size else {
                return .refuse(.badRange("Content-Range '\(headers["Content-Range"] ?? "none")' does not match bytes \(from)-\(end)/\(size)"))
            }
            return .stream(etag: etag)
        case 200:
            if ranged && !(from == 0 && end == size - 1) { return .refuse(.rangeIgnored) }
            if let length = headers["Content-Length"].flatMap({ Int64($0) }), length != size {
                return .refuse(.badRange("Content-Length \(length) but the tree says \(size) bytes"))
            }
            return .stream(etag: etag)
        case 206:
            return .refuse(.badRange("206 to a request without Range"))
        case 300..<400:
            guard let location = headers["Location"],
                  let target = URL(string: location, relativeTo: URL(string: url))?.absoluteString else {
                return .refuse(.badRange("redirect without Location"))
            }
            return .refuse(.redirect(target))
        case 403 where !isHubOrigin:
            return .refuse(.expiredLocation)  // a signed CDN URL that expired: resolve again
        default:
            return .errorBody
        }
    }

    /// Parses `bytes a-b/total` (total may be `*`): nil unless every number is plain digits,
    /// a <= b and, with a total, b < total (RFC 9110 14.4).
    public static func parseContentRange(_ header: String?) -> (start: Int64, end: Int64, total: Int64?)? {
        guard let header, header.lowercased().hasPrefix("bytes ") else { return nil }
        let halves = header.dropFirst(6).split(separator: "/", maxSplits: 1)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let start = digits(bounds[0]), let end = digits(bounds[1]), start <= end else { return nil }
        if halves[1] == "*" { return (start, end, nil) }
        guard let total = digits(halves[1]), end < total else { return nil }
        return (start, end, total)
    }

    /// `1*DIGIT`: no sign, no space.
    private static func digits(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int64(text)
    }
}
