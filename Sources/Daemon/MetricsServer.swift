// MetricsServer - the one HTTP endpoint of `speech-fetchd --metrics ADDR:PORT`: GET /metrics.
//
// A thread of its own with one listening socket and one poll loop over every connection (at most
// 64; the longest waiting makes room for a new one), each bounded (8 KiB of request head, the
// whole head within 2 s, the answer read within 2 s more): a slow or idle client never delays a
// scrape. A scraper asks every few seconds, and anything else gets a short error. It serves nothing but the page (no files, no other paths), and the page
// holds no secret: counts, states and the build, never a token, a URL or a path.
import Foundation
import SharedFiles
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

    /// Bounds on what a client may send and how long it may take: a request's whole head within
    /// 2 s of its connection (not per read: a byte every 1.9 s does not keep it), and at most
    /// `connectionLimit` connections at once.
    static let headLimit = 8 << 10
    static let requestTimeout: UInt64 = 2_000_000_000
    static let connectionLimit = 64

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
        var connections: [MetricsConnection] = []
        while !stopped.load(ordering: .relaxed) {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            for c in connections { fds.append(pollfd(fd: c.fd, events: Int16(c.isAnswering ? POLLOUT : POLLIN), revents: 0)) }
            let now = MonotonicClock.nanoseconds()
            guard poll(&fds, nfds_t(fds.count), MetricsServer.pollTimeout(connections, now: now)) >= 0 else { continue }  // EINTR: look again
            for (i, entry) in fds.enumerated().dropFirst() where entry.revents != 0 {
                step(&connections[i - 1])
            }
            // Past its deadline (a client that sends its head slowly, or never reads the answer)
            // or finished: closed. No answer is owed to a client that did not finish asking.
            let after = MonotonicClock.nanoseconds()
            connections.removeAll { c in
                guard c.isFinished || after >= c.deadline else { return false }
                close(c.fd)
                return true
            }
            if fds[0].revents & Int16(POLLIN) != 0 { acceptOne(into: &connections, now: after) }
        }
        for c in connections { close(c.fd) }
    }

    /// Milliseconds until the nearest deadline, at most a quarter second (the stop flag's look).
    private static func pollTimeout(_ connections: [MetricsConnection], now: UInt64) -> Int32 {
        guard let nearest = connections.map(\.deadline).min() else { return 250 }
        if nearest <= now { return 0 }
        let milliseconds: UInt64 = (nearest - now) / 1_000_000 + 1
        return Int32(min(250, milliseconds))
    }

    /// Takes one waiting connection. At the bound, the connection that has waited longest makes
    /// room: idle connections never keep a scraper out.
    private func acceptOne(into connections: inout [MetricsConnection], now: UInt64) {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)  // no worker started meanwhile inherits it
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)  // the loop never blocks on one client
        if connections.count >= MetricsServer.connectionLimit {
            let oldest = connections.firstIndex { $0.out.isEmpty && !$0.isDraining } ?? 0  // one still asking, if any
            close(connections.remove(at: oldest).fd)
        }
        connections.append(MetricsConnection(fd: client, deadline: now + MetricsServer.requestTimeout))
    }

    /// Moves one connection on: reads its head (then prepares the answer), writes its answer,
    /// or reads and drops what the client still sends after it (the rest of an over-long head,
    /// a body): closing with unread bytes would send a reset, which destroys the answer.
    private func step(_ c: inout MetricsConnection) {
        if c.isAnswering {
            let n = c.out[c.sent...].withUnsafeBytes { Glibc.send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { c.sent += n } else if n < 0 && (errno == EAGAIN || errno == EINTR) { return } else { c.isFinished = true; return }
            if c.sent == c.out.count {
                c.out = []
                shutdown(c.fd, Int32(SHUT_WR))  // the answer is whole; the client's close ends the connection
                c.isDraining = true
            }
            return
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard n > 0 else { c.isFinished = true; return }  // closed by the client: no answer owed
        if c.isDraining { return }  // what follows the answered head is read and dropped
        c.head += buffer[0..<n]
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        let complete = c.head.count >= 4 && c.head.indices.dropLast(3).contains { c.head[$0..<$0 + 4].elementsEqual(end) }
        guard complete || c.head.count >= MetricsServer.headLimit else { return }
        c.out = answer(to: complete ? c.head : [])
        // The answer gets a deadline of its own: a client that stops reading is dropped then.
        c.deadline = MonotonicClock.nanoseconds() + MetricsServer.requestTimeout
    }

    /// The whole answer (status, headers, body) to one request head; an empty head is one past
    /// the limit.
    private func answer(to head: [UInt8]) -> [UInt8] {
        let firstLine = String(decoding: head.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
        let words = firstLine.split(separator: " ")
        guard !head.isEmpty else {
            return message(status: "400 Bad Request", body: "a request head is at most \(MetricsServer.headLimit >> 10) KiB\n")
        }
        guard words.count == 3, words[2].hasPrefix("HTTP/1.") else {
            return message(status: "400 Bad Request", body: "a request line is `GET /metrics HTTP/1.1`\n")
        }
        let path = words[1].split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard path == "/metrics" else { return message(status: "404 Not Found", body: "only /metrics is served here\n") }
        guard words[0] == "GET" || words[0] == "HEAD" else {
            return message(status: "405 Method Not Allowed", body: "only GET /metrics\n", extra: "Allow: GET, HEAD\r\n")
        }
        return message(status: "200 OK", body: page(), contentType: "text/plain; version=0.0.4; charset=utf-8", headOnly: words[0] == "HEAD")
    }

    private func message(status: String, body: String, contentType: String = "text/plain; charset=utf-8",
                         extra: String = "", headOnly: Bool = false) -> [UInt8] {
        let bytes = Array(body.utf8)
        var out = Array("HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(bytes.count)\r\n\(extra)Connection: close\r\n\r\n".utf8)
        if !headOnly { out += bytes }
        return out
    }
}

/// One client of the endpoint, between its accept and its close.
struct MetricsConnection {
    let fd: Int32
    /// When it is closed, answered or not (monotonic nanoseconds): the whole head must arrive
    /// before it, and then the whole answer must be read before the next.
    var deadline: UInt64
    var head: [UInt8] = []
    /// The answer, while it is being written.
    var out: [UInt8] = []
    var sent = 0
    /// Answered: what the client still sends is read and dropped until it closes (or the deadline).
    var isDraining = false
    var isFinished = false

    init(fd: Int32, deadline: UInt64) {
        self.fd = fd
        self.deadline = deadline
    }

    var isAnswering: Bool { !out.isEmpty }
}
