// FolderOpenCounter - how many times a folder was opened (listed), counted by the kernel
// (inotify's IN_OPEN on the folder itself), not by the code under test: a test of what a look
// costs the file server asserts on this.
import Foundation
import Glibc
import XCTest

final class FolderOpenCounter: @unchecked Sendable {  // its one descriptor; a test reads it from one thread at a time
    private let fd: Int32

    /// Counts opens of `path` from now on; skips the test where inotify cannot be had.
    init(_ path: String) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw XCTSkip("no inotify instance here") }
        guard inotify_add_watch(fd, path, UInt32(IN_OPEN)) >= 0 else {
            close(fd)
            throw XCTSkip("cannot watch \(path)")
        }
    }

    deinit { close(fd) }

    /// Opens of the folder itself (or, with `entry`, of the file of that name in it) since the
    /// last call. Read it after each step that may open it: the kernel merges an event into an
    /// identical one still queued, so two opens in a row unread count as one.
    func take(entry: String? = nil) -> Int {
        var count = 0
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return count }
            var offset = 0
            while offset + 16 <= n {
                let (mask, length) = buffer.withUnsafeBytes { raw -> (UInt32, UInt32) in
                    (raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                     raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                }
                let name = length == 0 ? nil : buffer.withUnsafeBytes { raw in
                    String(decoding: raw[(offset + 16)..<(offset + 16 + Int(length))].prefix { $0 != 0 }, as: UTF8.self)
                }
                if mask & UInt32(IN_OPEN) != 0 {
                    if let entry { count += name == entry ? 1 : 0 } else if mask & UInt32(IN_ISDIR) != 0 && name == nil { count += 1 }
                }
                offset += 16 + Int(length)
            }
        }
    }
}
