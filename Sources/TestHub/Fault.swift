// Fault - one misbehaviour the test Hub can put on a file's body endpoints (the resolve
// answer of a small file, or the CDN answer of an LFS file), so clients can be tested
// against dropped connections, stalls, corrupt bytes, refusals and ignored ranges.
import Foundation

/// A misbehaviour applied when the test Hub serves a file's body.
///
/// Faults with `times` apply to the next `times` responses of that file and are then used up;
/// `flipByte` without `times`, `ignoreRange` and `rateLimit` stay until `TestHub.clearFaults()`.
public enum Fault: Sendable, Codable, Equatable {
    /// Close the socket after sending `afterBytes` body bytes of the response (the whole body
    /// when it is shorter), for the next `times` responses that carry a body.
    case dropConnection(afterBytes: Int, times: Int)
    /// Announce `missingBytes` more in Content-Length than the body carries, send the body whole
    /// and close the connection, for the next `times` body responses: the client has every byte
    /// it asked for, and a transfer that ended short of its Content-Length.
    case truncateBody(missingBytes: Int, times: Int)
    /// Stop sending for `seconds` after `afterBytes` body bytes, then go on, for the next `times` body responses.
    case stall(afterBytes: Int, seconds: Double, times: Int)
    /// Every response covering file offset `offset` carries that byte XORed with 0xFF; with
    /// `times`, only the next `times` responses that cover it (a flip on the way, not on disk).
    case flipByte(offset: Int, times: Int? = nil)
    /// Answer `code` (500, 503, 429, 408, ...) instead of the file for the next `times` requests,
    /// with `Retry-After: retryAfter` when given.
    case status(code: Int, times: Int, retryAfter: Int?)
    /// Answer 200 with the whole body even when a Range is asked.
    case ignoreRange
    /// Pace body bytes to `bytesPerSecond` on each response.
    case rateLimit(bytesPerSecond: Int)
    /// The CDN answers 403 (signature expired) for the next `times` requests of this file.
    case cdnExpired(times: Int)

    // Xet-backed files (docs/testhub.md, "Xet"): the CAS's reconstruction and xorb answers.
    /// Answer `code` to the next `times` reconstruction requests of this file.
    case reconstructionStatus(code: Int, times: Int, retryAfter: Int?)
    /// Wait `seconds` before answering the next `times` reconstruction requests.
    case reconstructionStall(seconds: Double, times: Int)
    /// Answer `code` to the next `times` xorb range requests made for this file.
    case xorbStatus(code: Int, times: Int, retryAfter: Int?)
    /// Pause `seconds` after `afterBytes` bytes of the next `times` xorb ranges made for this file.
    case xorbStall(afterBytes: Int, seconds: Double, times: Int)
    /// Send the next `times` xorb ranges for this file `missingBytes` short of their
    /// Content-Length, then close the connection.
    case xorbTruncated(missingBytes: Int, times: Int)
    /// Answer 401 (the access token expired) to the next `times` reconstruction requests: a
    /// client must fetch a new token and ask again.
    case xetTokenExpired(times: Int)
    /// One byte flipped in the stored bytes of the file's chunk `chunk` (counted from 0 in file
    /// order), in every xorb range that covers it, whichever file asked (stays).
    case corruptChunk(chunk: Int)

    private enum CodingKeys: String, CodingKey {
        case type, afterBytes, seconds, times, offset, code, retryAfter, bytesPerSecond, missingBytes, chunk
    }

    /// The `type` names of the JSON form, as documented in docs/testhub.md.
    private enum Kind: String, Codable {
        case dropConnection, truncateBody, stall, flipByte, status, ignoreRange, rateLimit, cdnExpired
        case reconstructionStatus, reconstructionStall, xorbStatus, xorbStall, xorbTruncated, xetTokenExpired, corruptChunk
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let times = try c.decodeIfPresent(Int.self, forKey: .times) ?? 1
        switch try c.decode(Kind.self, forKey: .type) {
        case .dropConnection:
            self = .dropConnection(afterBytes: try c.decodeIfPresent(Int.self, forKey: .afterBytes) ?? 0, times: times)
        case .truncateBody:
            self = .truncateBody(missingBytes: try c.decodeIfPresent(Int.self, forKey: .missingBytes) ?? 1, times: times)
        case .stall:
            self = .stall(afterBytes: try c.decodeIfPresent(Int.self, forKey: .afterBytes) ?? 0,
                          seconds: try c.decode(Double.self, forKey: .seconds), times: times)
        case .flipByte:
            self = .flipByte(offset: try c.decode(Int.self, forKey: .offset), times: try c.decodeIfPresent(Int.self, forKey: .times))
        case .status:
            self = .status(code: try c.decode(Int.self, forKey: .code), times: times,
                           retryAfter: try c.decodeIfPresent(Int.self, forKey: .retryAfter))
        case .ignoreRange:
            self = .ignoreRange
        case .rateLimit:
            self = .rateLimit(bytesPerSecond: try c.decode(Int.self, forKey: .bytesPerSecond))
        case .cdnExpired:
            self = .cdnExpired(times: times)
        case .reconstructionStatus:
            self = .reconstructionStatus(code: try c.decode(Int.self, forKey: .code), times: times,
                                         retryAfter: try c.decodeIfPresent(Int.self, forKey: .retryAfter))
        case .reconstructionStall:
            self = .reconstructionStall(seconds: try c.decode(Double.self, forKey: .seconds), times: times)
        case .xorbStatus:
            self = .xorbStatus(code: try c.decode(Int.self, forKey: .code), times: times,
                               retryAfter: try c.decodeIfPresent(Int.self, forKey: .retryAfter))
        case .xorbStall:
            self = .xorbStall(afterBytes: try c.decodeIfPresent(Int.self, forKey: .afterBytes) ?? 0,
                              seconds: try c.decode(Double.self, forKey: .seconds), times: times)
        case .xorbTruncated:
            self = .xorbTruncated(missingBytes: try c.decodeIfPresent(Int.self, forKey: .missingBytes) ?? 1, times: times)
        case .xetTokenExpired:
            self = .xetTokenExpired(times: times)
        case .corruptChunk:
            self = .corruptChunk(chunk: try c.decode(Int.self, forKey: .chunk))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .dropConnection(let afterBytes, let times):
            try c.encode(Kind.dropConnection, forKey: .type)
            try c.encode(afterBytes, forKey: .afterBytes)
            try c.encode(times, forKey: .times)
        case .truncateBody(let missingBytes, let times):
            try c.encode(Kind.truncateBody, forKey: .type)
            try c.encode(missingBytes, forKey: .missingBytes)
            try c.encode(times, forKey: .times)
        case .stall(let afterBytes, let seconds, let times):
            try c.encode(Kind.stall, forKey: .type)
            try c.encode(afterBytes, forKey: .afterBytes)
            try c.encode(seconds, forKey: .seconds)
            try c.encode(times, forKey: .times)
        case .flipByte(let offset, let times):
            try c.encode(Kind.flipByte, forKey: .type)
            try c.encode(offset, forKey: .offset)
            try c.encodeIfPresent(times, forKey: .times)
        case .status(let code, let times, let retryAfter):
            try c.encode(Kind.status, forKey: .type)
            try c.encode(code, forKey: .code)
            try c.encode(times, forKey: .times)
            try c.encodeIfPresent(retryAfter, forKey: .retryAfter)
        case .ignoreRange:
            try c.encode(Kind.ignoreRange, forKey: .type)
        case .rateLimit(let bytesPerSecond):
            try c.encode(Kind.rateLimit, forKey: .type)
            try c.encode(bytesPerSecond, forKey: .bytesPerSecond)
        case .cdnExpired(let times):
            try c.encode(Kind.cdnExpired, forKey: .type)
            try c.encode(times, forKey: .times)
        case .reconstructionStatus(let code, let times, let retryAfter):
            try c.encode(Kind.reconstructionStatus, forKey: .type)
            try c.encode(code, forKey: .code)
            try c.encode(times, forKey: .times)
            try c.encodeIfPresent(retryAfter, forKey: .retryAfter)
        case .reconstructionStall(let seconds, let times):
            try c.encode(Kind.reconstructionStall, forKey: .type)
            try c.encode(seconds, forKey: .seconds)
            try c.encode(times, forKey: .times)
        case .xorbStatus(let code, let times, let retryAfter):
            try c.encode(Kind.xorbStatus, forKey: .type)
            try c.encode(code, forKey: .code)
            try c.encode(times, forKey: .times)
            try c.encodeIfPresent(retryAfter, forKey: .retryAfter)
        case .xorbStall(let afterBytes, let seconds, let times):
            try c.encode(Kind.xorbStall, forKey: .type)
            try c.encode(afterBytes, forKey: .afterBytes)
            try c.encode(seconds, forKey: .seconds)
            try c.encode(times, forKey: .times)
        case .xorbTruncated(let missingBytes, let times):
            try c.encode(Kind.xorbTruncated, forKey: .type)
            try c.encode(missingBytes, forKey: .missingBytes)
            try c.encode(times, forKey: .times)
        case .xetTokenExpired(let times):
            try c.encode(Kind.xetTokenExpired, forKey: .type)
            try c.encode(times, forKey: .times)
        case .corruptChunk(let chunk):
            try c.encode(Kind.corruptChunk, forKey: .type)
            try c.encode(chunk, forKey: .chunk)
        }
    }
}
