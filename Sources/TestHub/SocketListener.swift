// SocketListener - a listening socket on a loopback address with an accept thread and a thread per
// connection. It keeps every open connection so stop() can shut them all down, and closes
// a connection's descriptor under the same lock, so stop() never touches a reused number.
import Foundation

final class SocketListener: @unchecked Sendable {
    /// The port actually bound (the kernel's choice when 0 was asked).
    let port: UInt16
    private let listenFD: Int32
    private let lock = NSLock()
    private var open: [Int32: ConnectionSocket] = [:]
    private var stopped = false
    private var started = false
    private let acceptDone = DispatchSemaphore(value: 0)
    private let connections = DispatchGroup()

    /// Binds `host` (an IPv4 loopback address: 127.0.0.1, or another of 127/8, which Linux
    /// routes to `lo` without setup) at `requested` (0: a free port).
    init(host: String = "127.0.0.1", port requested: UInt16) throws {
        var loopback = in_addr()
        guard inet_pton(AF_INET, host, &loopback) == 1, UInt32(bigEndian: loopback.s_addr) >> 24 == 127 else {
            throw TestHubError.notLoopback(host)
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestHubError.cannotListen(host: host, port: requested, errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = requested.bigEndian
        address.sin_addr = loopback
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 256) == 0 else {
            let code = errno
            close(fd)
            throw TestHubError.cannotListen(host: host, port: requested, errno: code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listenFD = fd
        port = UInt16(bigEndian: actual.sin_port)
    }

    deinit {
        stop()
    }

    /// Accepts connections on a thread of its own and runs `serve` for each on a new thread.
    func start(serve: @escaping @Sendable (ConnectionSocket) -> Void) {
        lock.withLock { started = true }
        let thread = Thread { [self] in
            acceptLoop(serve: serve)
            acceptDone.signal()
        }
        thread.name = "testhub-accept-\(port)"
        thread.start()
    }

    private func acceptLoop(serve: @escaping @Sendable (ConnectionSocket) -> Void) {
        while true {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                let code = errno
                if lock.withLock({ stopped }) { return }
                if code == EINTR || code == ECONNABORTED { continue }
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                    usleep(10_000)
                    continue
                }
                return
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var idle = timeval(tv_sec: 300, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, socklen_t(MemoryLayout<timeval>.size))
            let socket = ConnectionSocket(fd: fd)
            let admitted: Bool = lock.withLock {
                guard !stopped else { return false }
                open[fd] = socket
                connections.enter()
                return true
            }
            guard admitted else {
                close(fd)
                continue
            }
            let thread = Thread { [self] in
                serve(socket)
                lock.withLock {
                    open[fd] = nil
                    close(fd)
                }
                connections.leave()
            }
            thread.name = "testhub-conn-\(port)"
            thread.start()
        }
    }

    /// Stops accepting, shuts every open connection down and waits (a few seconds at most)
    /// for their threads to finish. Idempotent.
    func stop() {
        let wasStarted: Bool? = lock.withLock {
            guard !stopped else { return nil }
            stopped = true
            _ = shutdown(listenFD, Int32(SHUT_RDWR))
            return started
        }
        guard let wasStarted else { return }
        if wasStarted { acceptDone.wait() }
        close(listenFD)
        // No connection is admitted once `stopped` is set, so this reaches every one.
        lock.withLock {
            for socket in open.values { socket.shutdown() }
        }
        _ = connections.wait(timeout: .now() + 5)
    }
}
