// HubRequest - one parsed HTTP/1.1 request: request line, headers, and the body the
// Content-Length announced.
import Foundation

struct HubRequest: Sendable {
    let method: String
    /// The request target as received ("/path?query"), for the request log.
    let target: String
    let version: String
    let headers: [(name: String, value: String)]
    var body = Data()

    /// The raw path part of the target (still percent-encoded).
    var rawPath: Substring {
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        // An absolute-form target ("http://host/path") names the path after the authority.
        if path.hasPrefix("http://") || path.hasPrefix("https://") {
            let afterScheme = path[path.range(of: "://")!.upperBound...]
            return afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
        }
        return path
    }

    /// The decoded path segments; a `%2F` inside a segment stays inside it.
    var segments: [String] {
        rawPath.split(separator: "/", omittingEmptySubsequences: true).map { URLText.decode($0) }
    }

    var query: [(name: String, value: String)] {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.count == 2 ? URLText.parseQuery(parts[1]) : []
    }

    func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// Whether the connection ends after this request's answer.
    var wantsClose: Bool {
        let connection = header("Connection")?.lowercased() ?? ""
        if connection.contains("close") { return true }
        return version == "HTTP/1.0" && !connection.contains("keep-alive")
    }

    /// The token of an `Authorization: Bearer <token>` header.
    var bearerToken: String? {
        guard let value = header("Authorization") else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }
}

/// Why a request could not be read.
enum RequestReadError: Error {
    /// The peer closed (or the hub is stopping) between requests.
    case closed
    /// Not HTTP we understand: answer 400 and close.
    case malformed(String)
}

/// Reads requests off one connection, keeping bytes that arrived past the current request.
struct RequestReader {
    private static let maxHeadBytes = 64 * 1024
    private var buffer: [UInt8] = []

    /// Reads the next request head; the body is read by `readBody` once the caller decided
    /// to accept it (after a `100 Continue` if one was expected).
    mutating func readHead(from socket: ConnectionSocket) throws -> HubRequest {
        var searchFrom = 0
        while true {
            if let end = headEnd(from: searchFrom) {
                let head = Array(buffer[0 ..< end])
                buffer.removeFirst(end + 4)
                return try parseHead(head)
            }
            if buffer.count > RequestReader.maxHeadBytes { throw RequestReadError.malformed("request head too large") }
            searchFrom = max(0, buffer.count - 3)
            let chunk = try socket.receive(maxBytes: 16 * 1024)
            if chunk.isEmpty {
                if buffer.allSatisfy({ $0 == 13 || $0 == 10 }) { throw RequestReadError.closed }
                throw RequestReadError.malformed("connection closed inside a request head")
            }
            buffer.append(contentsOf: chunk)
        }
    }

    mutating func readBody(count: Int, from socket: ConnectionSocket) throws -> Data {
        while buffer.count < count {
            let chunk = try socket.receive(maxBytes: min(1 << 20, count - buffer.count))
            if chunk.isEmpty { throw RequestReadError.malformed("connection closed inside a request body") }
            buffer.append(contentsOf: chunk)
        }
        let body = Data(buffer[0 ..< count])
        buffer.removeFirst(count)
        return body
    }

    private func headEnd(from start: Int) -> Int? {
        guard buffer.count >= 4 else { return nil }
        var i = start
        while i + 3 < buffer.count {
            if buffer[i] == 13, buffer[i + 1] == 10, buffer[i + 2] == 13, buffer[i + 3] == 10 { return i }
            i += 1
        }
        return nil
    }

    private func parseHead(_ head: [UInt8]) throws -> HubRequest {
        // Leading empty lines before a request line are allowed (RFC 9112 section 2.2).
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n")
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard let requestLine = lines.first else { throw RequestReadError.malformed("empty request") }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].first == "/" || parts[1].hasPrefix("http") else {
            throw RequestReadError.malformed("bad request line: \(requestLine)")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw RequestReadError.malformed("bad header line: \(line)") }
            headers.append((String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                            String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
        }
        return HubRequest(method: String(parts[0]), target: String(parts[1]), version: String(parts[2]), headers: headers)
    }
}
