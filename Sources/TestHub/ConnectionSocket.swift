// ConnectionSocket - one accepted TCP connection: whole-buffer sends that never raise
// SIGPIPE, and receives that report the peer's close as an empty read.
import Foundation
import SharedFiles

final class ConnectionSocket: @unchecked Sendable {
    let fd: Int32

    init(fd: Int32) {
        self.fd = fd
    }

    /// Up to `maxBytes` bytes; empty when the peer closed, the idle timeout passed or the hub stopped.
    func receive(maxBytes: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: maxBytes)
        let n = FileIO.restartingAfterSignal { bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress, maxBytes, 0) } }
        return n >= 0 ? Array(bytes[0 ..< n]) : []
    }

    /// Sends every byte unless the connection fails; returns how many were accepted by the kernel.
    @discardableResult
    func send(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        var done = 0
        while done < bytes.count {
            let n = FileIO.restartingAfterSignal { Glibc.send(fd, base + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            if n < 0 { return done }
            done += n
        }
        return done
    }

    /// Sends all of `data`; false when the connection failed.
    func send(_ data: Data) -> Bool {
        data.withUnsafeBytes { send($0) } == data.count
    }

    /// Ends both directions, waking a thread blocked in receive or send.
    func shutdown() {
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }
}
