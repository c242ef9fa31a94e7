import Foundation
import XCTest

/// What a test points at when nothing must answer: a loopback port nobody listens on, a pid
/// whose process has exited and been reaped.
extension XCTestCase {
    /// An endpoint nobody listens on: connections are refused (a transport failure). The port was
    /// bound once and released, so no other test's server holds it at that moment.
    func deadEndpoint() -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        close(fd)
        return "http://127.0.0.1:\(UInt16(bigEndian: addr.sin_port))"
    }

    /// A pid that belonged to a process that has exited and been reaped.
    func deadPid() throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/true")
        try p.run()
        p.waitUntilExit()
        return p.processIdentifier
    }
}
