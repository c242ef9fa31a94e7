// StagingDescriptor - the open descriptor of one staging file, counted by its users.
//
// A staging file starts with its descriptor open. A host that stages many files at once (the
// embedded engine plans a whole selection up front) asks for `closesWhenIdle`: the descriptor
// is then open only while something uses it — a range in flight holds it, a hash, a sync or
// the finalization borrow it — so a download of thousands of files needs descriptors only for
// the files in flight, not one per file of the selection (a `ulimit -n` of 1024 is common).
// Reopening checks the inode: bytes never go to a file that replaced the staging file.
import Foundation
import SharedFiles

final class StagingDescriptor: @unchecked Sendable {
    private let path: String
    private let inode: UInt64
    private let lock = NSLock()
    /// -1 while closed.
    private var fd: Int32
    /// Holds (ranges in flight) and borrows under way.
    private var users = 0
    private var closesWhenIdle = false

    init(path: String, fd: Int32, inode: UInt64) {
        self.path = path
        self.fd = fd
        self.inode = inode
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Runs `body` with the descriptor, opening it again first when it was closed.
    func borrow<T>(_ body: (Int32) throws -> T) throws -> T {
        let descriptor = try lock.withLock { () throws -> Int32 in
            if fd < 0 { fd = try reopen() }
            users += 1
            return fd
        }
        defer { lock.withLock { users -= 1; closeIfIdle() } }
        return try body(descriptor)
    }

    /// Keeps the descriptor open (once a use opened it) until `release`: a range in flight
    /// writes many chunks, and each must not reopen the file.
    func hold() { lock.withLock { users += 1 } }

    func release() {
        lock.withLock {
            users -= 1
            closeIfIdle()
        }
    }

    /// From now on the descriptor is closed whenever no use holds it.
    func closeWhenIdle() {
        lock.withLock {
            closesWhenIdle = true
            closeIfIdle()
        }
    }

    /// Under `lock`.
    private func closeIfIdle() {
        guard closesWhenIdle, users == 0, fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    /// Under `lock`. The staging file is opened without creating it: one that vanished or was
    /// replaced since it was staged is an error, never a fresh file.
    private func reopen() throws -> Int32 {
        let path = path
        let opened = try OpenedFile(path, flags: O_RDWR | O_CLOEXEC | O_NOFOLLOW,
                                      opening: "open again the staging file", reading: "read the identity of the staging file")
        let fd = opened.fd, st = opened.facts
        guard UInt64(st.st_ino) == inode else {
            close(fd)
            throw CacheError.io(path: path, operation: "open again (it was replaced meanwhile) the staging file", errno: ESTALE)
        }
        return fd
    }
}
