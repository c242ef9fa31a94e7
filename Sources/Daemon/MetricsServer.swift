// MetricsServer - the one HTTP endpoint of `speech-fetchd --metrics ADDR:PORT`: GET /metrics.
//
// A thread of its own with one listening socket, one connection at a time, every read bounded
// (8 KiB of request head, 2 s per read): a scraper asks every few seconds, and anything else
// gets a short error. It serves nothing but the page (no files, no other paths), and the page
// holds no secret: counts, states and the build, never a token, a URL or a path.
import Foundation
import Synchronization

/// Where `--metrics` listens: a numeric IPv4 or IPv6 address and a port.
public struct MetricsAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: UInt16
    let isIPv6: Bool

    /// Nil when `host` is not a numeric address (the command line checked its form already).
    public init?(host: String, port: UInt16) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            isIPv6 = false
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            isIPv6 = true
        } else {
            return nil
        }
        guard port > 0 else { return nil }
        self.host = host
        self.port = port
    }

    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The endpoint could not be opened.
public struct MetricsServerError: Error, Sendable, CustomStringConvertible {
    /// The address as `--metrics` gave it.
    public let address: String
    public let operation: String
    public let errno: Int32

    public init(address: String, operation: String, errno: Int32) {
        self.address = address
        self.operation = operation
        self.errno = errno
    }

    public var description: String {
        "cannot \(operation) \(address) for --metrics (\(String(cString: strerror(errno)))); "
            + (errno == EADDRINUSE ? "another process listens there: give --metrics another port"
                : "give --metrics another address (a local one, such as 127.0.0.1:9464)")
    }
}

/// Serves `GET /metrics` on one address until stopped.
public final class MetricsServer: Sendable {
    public let address: MetricsAddress
    private let listener: Int32
    private let stopped = Atomic<Bool>(false)
    private let page: @Sendable () -> String

    /// Bounds on what a client may send and how long it may take.
    static let headLimit = 8 << 10
    static let readTimeout: Int = 2

    /// Opens the listening socket now (so a taken port fails the daemon's start, not later).
    public init(address: MetricsAddress, page: @escaping @Sendable () -> String) throws {
        self.address = address
        self.page = page
        let fd = socket(address.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw MetricsServerError(address: address.description, operation: "open a socket on", errno: errno) }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        if address.isIPv6 {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = address.port.bigEndian
            inet_pton(AF_INET6, address.host, &sa.sin6_addr)
            bound = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = address.port.bigEndian
            inet_pton(AF_INET, address.host, &sa.sin_addr)
            bound = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        guard bound == 0 else {
            let e = errno
            close(fd)
            throw MetricsServerError(address: address.description, operation: "listen on", errno: e)
        }
        guard listen(fd, 16) == 0 else {
            let e = errno
            close(fd)
            throw MetricsServerError(address: address.description, operation: "listen on", errno: e)
        }
        listener = fd
    }

    deinit { close(listener) }

    /// Serves on a thread of its own until `stop`.
    public func start() {
        let thread = Thread { [self] in serve() }
        thread.name = "metrics"
        thread.start()
    }

    /// Stops accepting within a quarter second.
    public func stop() { stopped.store(true, ordering: .relaxed) }

    private func serve() {
        Thread.current.name = "metrics"  // named from inside, so `ps -L` and /proc/PID/task show it (a scrape is its CPU)
        while !stopped.load(ordering: .relaxed) {
            var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 250) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)  // no worker started meanwhile inherits it
            answer(client)
            close(client)
        }
    }

    /// Reads one request head and writes one answer; the connection then closes.
    private func answer(_ fd: Int32) {
        var timeout = timeval(tv_sec: MetricsServer.readTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 2048)
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while head.count < MetricsServer.headLimit {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }  // closed, or silent past the timeout: no answer owed
            head += buffer[0..<n]
            if head.count >= 4, head.indices.dropLast(3).contains(where: { head[$0..<$0 + 4].elementsEqual(end) }) { break }
        }
        let firstLine = String(decoding: head.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
        let words = firstLine.split(separator: " ")
        guard head.count < MetricsServer.headLimit, words.count == 3, words[2].hasPrefix("HTTP/1.") else {
            return send(fd, status: "400 Bad Request", body: "a request line is `GET /metrics HTTP/1.1`\n")
        }
        let path = words[1].split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard path == "/metrics" else { return send(fd, status: "404 Not Found", body: "only /metrics is served here\n") }
        guard words[0] == "GET" || words[0] == "HEAD" else {
            return send(fd, status: "405 Method Not Allowed", body: "only GET /metrics\n", extra: "Allow: GET, HEAD\r\n")
        }
        send(fd, status: "200 OK", body: page(), contentType: "text/plain; version=0.0.4; charset=utf-8", headOnly: words[0] == "HEAD")
    }

    private func send(_ fd: Int32, status: String, body: String, contentType: String = "text/plain; charset=utf-8",
                      extra: String = "", headOnly: Bool = false) {
        let bytes = Array(body.utf8)
        var out = Array("HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(bytes.count)\r\n\(extra)Connection: close\r\n\r\n".utf8)
        if !headOnly { out += bytes }
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            sent += n
        }
    }
}
