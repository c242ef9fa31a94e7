// HTTPMessage - the request and response values the libcurl wrapper speaks in.
import Foundation

/// Response headers in arrival order, looked up without regard to case.
public struct HTTPHeaders: Sendable, CustomStringConvertible {
    public private(set) var fields: [(name: String, value: String)] = []

    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }

    public mutating func append(name: String, value: String) { fields.append((name, value)) }

    /// The last value of a header (the one that wins when a server repeats it).
    public subscript(_ name: String) -> String? {
        fields.last { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    public var description: String { fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n") }
}

/// One HTTP request. Redirects are never followed by libcurl: callers see every 3xx,
/// so metadata riding on a redirect is kept and credentials never leave their host.
public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable { case get = "GET", head = "HEAD" }

    public var url: String
    public var method: Method
    public var headers: [(name: String, value: String)]
    /// Inclusive byte range; `end == nil` asks for everything from `start`.
    public var range: (start: Int64, end: Int64?)?
    /// Seconds allowed to establish the connection.
    public var connectTimeout: Double
    /// Seconds with no byte received before the attempt is abandoned (the stall guard).
    public var stallTimeout: Double
    /// Bytes libcurl reads per body chunk (CURLOPT_BUFFERSIZE), nil for 256 KiB; a rate cap
    /// asks for less, so that each chunk is a short wait.
    public var receiveBufferSize: Int?

    public init(url: String, method: Method = .get, headers: [(name: String, value: String)] = [],
                range: (start: Int64, end: Int64?)? = nil, connectTimeout: Double = 15, stallTimeout: Double = 300) {
        self.url = url
        self.method = method
        self.headers = headers
        self.range = range
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
    }
}

/// A complete response with its body held in memory (API calls and small files only).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: Data
    /// The URL that answered.
    public var url: String

    public init(status: Int, headers: HTTPHeaders, body: Data, url: String) {
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
    }
}

/// A transfer that never produced an HTTP answer: no route, DNS, refused, timeout, stall, reset.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    /// libcurl's CURLcode.
    public var code: Int
    public var message: String
    public var url: String
    /// True when the transfer was abandoned because no byte arrived for the stall timeout.
    public var isStall: Bool

    public init(code: Int, message: String, url: String, isStall: Bool = false) {
        self.code = code
        self.message = message
        self.url = url
        self.isStall = isStall
    }

    public var description: String {
        isStall ? "no data from \(url) within the stall timeout (\(message))" : "\(message) (\(url))"
    }
}
