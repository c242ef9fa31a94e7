// RawHTTPClient - a tiny HTTP/1.1 client on a plain socket for these tests: one keep-alive
// connection, Content-Length bodies, and a truncated body reported rather than hidden.
import Foundation
import XCTest

struct RawResponse {
    let status: Int
    let headers: [(name: String, value: String)]
    let body: Data
    /// The peer closed before Content-Length bytes arrived.
    let truncated: Bool

    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    var json: Any? { try? JSONSerialization.jsonObject(with: body) }
}

enum RawHTTPError: Error {
    case badURL(String)
    case connectFailed(Int32)
    case closedBeforeResponse
    case malformed(String)
}

final class RawHTTPClient {
    let port: UInt16
    /// The loopback address in `base` (127.0.0.1, or the CDN's 127.0.0.2).
    let host: String
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []

    /// `base` like "http://127.0.0.1:1234" (a path after it is ignored; any 127.x.y.z host).
    init(_ base: String) throws {
        guard let url = URL(string: base), let host = url.host, host.hasPrefix("127."), let port = url.port else {
            throw RawHTTPError.badURL(base)
        }
        self.host = host
        self.port = UInt16(port)
    }

    deinit { close() }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        buffer = []
    }

    var isConnected: Bool { fd >= 0 }

    private func connect() throws {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let code = errno
            Glibc.close(s)
            throw RawHTTPError.connectFailed(code)
        }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        fd = s
    }

    /// Sends one request on the kept connection (reconnecting when needed) and reads the answer.
    func request(_ method: String, _ target: String, headers: [String: String] = [:], body: Data? = nil) throws -> RawResponse {
        if fd < 0 { try connect() }
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        var out = Data(head.utf8)
        if let body { out.append(body) }
        let sent = out.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == out.count else {
            close()
            throw RawHTTPError.closedBeforeResponse
        }
        return try readResponse(method: method)
    }

    /// A GET or HEAD on an absolute URL (e.g. a Location) with a fresh client.
    static func fetch(_ url: String, method: String = "GET", headers: [String: String] = [:]) throws -> RawResponse {
        guard let slash = url.range(of: "/", range: url.range(of: "://")!.upperBound ..< url.endIndex) else {
            throw RawHTTPError.badURL(url)
        }
        let client = try RawHTTPClient(String(url[..<slash.lowerBound]))
        return try client.request(method, String(url[slash.lowerBound...]), headers: headers)
    }

    private func readResponse(method: String) throws -> RawResponse {
        while true {
            let headEnd = try readUntilHeadEnd()
            let text = String(decoding: buffer[0 ..< headEnd], as: UTF8.self)
            buffer.removeFirst(headEnd + 4)
            var lines = text.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst().split(separator: " ")
            guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw RawHTTPError.malformed(text) }
            if status == 100 { continue }
            let headers: [(name: String, value: String)] = lines.compactMap { line in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
            }
            let response = RawResponse(status: status, headers: headers, body: Data(), truncated: false)
            let length = method == "HEAD" ? 0 : Int(response.header("Content-Length") ?? "0") ?? 0
            var truncated = false
            while buffer.count < length {
                let chunk = receive()
                if chunk.isEmpty {
                    truncated = true
                    break
                }
                buffer += chunk
            }
            let bodyCount = min(length, buffer.count)
            let body = Data(buffer[0 ..< bodyCount])
            buffer.removeFirst(bodyCount)
            if truncated || response.header("Connection")?.lowercased() == "close" { close() }
            return RawResponse(status: status, headers: headers, body: body, truncated: truncated)
        }
    }

    private func readUntilHeadEnd() throws -> Int {
        while true {
            if buffer.count >= 4 {
                for i in 0 ... buffer.count - 4 where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                    return i
                }
            }
            let chunk = receive()
            if chunk.isEmpty {
                close()
                throw RawHTTPError.closedBeforeResponse
            }
            buffer += chunk
        }
    }

    private func receive() -> [UInt8] {
        guard fd >= 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: 64 * 1024)
        let n = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(bytes[0 ..< n]) : []
    }
}
