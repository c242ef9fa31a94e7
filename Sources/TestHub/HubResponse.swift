// HubResponse - what an endpoint answers: status, headers and a body that is either
// bytes in memory or a slice of a repo file sent from disk.
import Foundation

/// A slice of a repo file to send as a body.
struct FileBody: Sendable {
    let diskPath: String
    /// "<org>/<name>/<path>", the key of faults and counters.
    let fileKey: String
    let offset: Int
    let length: Int
    /// What its bytes count as in the ledger.
    var channel: BodyChannel = .file
    /// Faults already chosen for it (xorb bodies); nil: the file's body faults, taken when it is sent.
    var presetFaults: BodyFaults?
}

struct HubResponse: Sendable {
    enum Body: Sendable {
        case empty
        case bytes(Data)
        case file(FileBody)

        var count: Int {
            switch self {
            case .empty: return 0
            case .bytes(let d): return d.count
            case .file(let f): return f.length
            }
        }
    }

    var status: Int
    var headers: [(name: String, value: String)] = []
    var body: Body = .empty

    init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON answer.
    static func json(_ value: OrderedJSON, status: Int = 200, headers: [(name: String, value: String)] = []) -> HubResponse {
        HubResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers,
                     body: .bytes(value.data))
    }

    /// A Hub error: JSON `{"error": message}` with `X-Error-Code` and `X-Error-Message`, as the Hub sends them.
    static func hubError(_ status: Int, code: String?, message: String,
                         headers: [(name: String, value: String)] = []) -> HubResponse {
        var extra = headers
        if let code { extra.append(("X-Error-Code", code)) }
        extra.append(("X-Error-Message", message))
        return json(.object([("error", .string(message))]), status: status, headers: extra)
    }

    static func text(_ status: Int, _ message: String) -> HubResponse {
        HubResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")],
                     body: .bytes(Data((message + "\n").utf8)))
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The status line and headers, with Content-Length, Connection and Date filled in.
    func head(keepAlive: Bool) -> Data {
        var text = "HTTP/1.1 \(status) \(HubResponse.reason(for: status))\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if header("Content-Length") == nil { text += "Content-Length: \(body.count)\r\n" }
        text += "Date: \(HubResponse.httpDate(Date()))\r\n"
        text += "Server: speech-testhub\r\n"
        text += "Connection: \(keepAlive ? "keep-alive" : "close")\r\n\r\n"
        return Data(text.utf8)
    }

    static func reason(for status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 206: return "Partial Content"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 416: return "Range Not Satisfiable"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Status \(status)"
        }
    }

    /// IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
    static func httpDate(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { String(n).leftPadded(to: 2) }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// ISO 8601 with milliseconds, as the Hub's JSON dates: "2024-05-01T12:00:00.000Z".
    static func isoDate(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { String(n).leftPadded(to: 2) }
        let millis = Int((date.timeIntervalSince1970 - Double(t)) * 1000)
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(String(min(999, max(0, millis))).leftPadded(to: 3))Z"
    }
}
