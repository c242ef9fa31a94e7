// FileIO - whole reads and writes through a descriptor (restarted after EINTR and short
// counts), and directory creation with its parents.
import CFileOps
import Foundation

/// A file operation that failed: the path, what was tried, and the errno. Each layer above says
/// it in its own error type (`CacheError.io`, `SpoolError.io`).
public struct FileError: Error, Sendable, Equatable {
    public let path: String
    public let operation: String
    public let errno: Int32

    public init(path: String, operation: String, errno: Int32) {
        self.path = path
        self.operation = operation
        self.errno = errno
    }
}

public enum FileIO {
    /// Writes all of `bytes`: at `offset` with pwrite, else at the file position. Nil when every
    /// byte was written, else the errno of the failed write.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64? = nil) -> Int32? {
        let (done, failure) = whole(bytes.count) { done in
            offset.map { pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t($0 + Int64(done))) }
                ?? write(fd, bytes.baseAddress! + done, bytes.count - done)
        }
        if let failure { return failure }
        return done < bytes.count ? EIO : nil
    }

    /// Fills `buffer` from `offset` (pread; else from the file position): the bytes read, fewer
    /// than `buffer.count` only at the end of the file; -1 with errno set when a read failed.
    public static func readFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64? = nil) -> Int {
        let (done, failure) = whole(buffer.count) { done in
            offset.map { pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t($0 + Int64(done))) }
                ?? read(fd, buffer.baseAddress! + done, buffer.count - done)
        }
        if let failure {
            errno = failure
            return -1
        }
        return done
    }

    /// The one loop of whole reads and writes: `step(done)` moves bytes from position `done` on
    /// and answers how many, 0 at the end of the file, -1 with errno set when it failed. Bytes
    /// moved until `count` or the end, and the errno that stopped it.
    private static func whole(_ count: Int, _ step: (Int) -> Int) -> (done: Int, errno: Int32?) {
        var done = 0
        while done < count {
            let n = restartingAfterSignal { step(done) }
            if n < 0 { return (done, errno) }
            if n == 0 { break }
            done += n
        }
        return (done, nil)
    }

    /// Calls `call` again while it fails with EINTR: a signal that arrived (Ctrl-C, SIGHUP) is
    /// not a failure of the read or write it interrupted.
    public static func restartingAfterSignal<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let n = call()
            if n >= 0 || errno != EINTR { return n }
        }
    }

    /// `O_DIRECT` for `open` (glibc declares it only under _GNU_SOURCE): reads that go around
    /// the page cache and a network or FUSE client's own caches. `stream` can read such a descriptor.
    public static var directFlag: Int32 { sf_o_direct() }

    /// Reads the file behind `fd` from `start` to `end` (nil: its end) with pread in 1 MiB pieces,
    /// handing each to `body`, which returns false to stop. The bytes handed over, and the errno
    /// of a read that failed (nil when the reads ended at `end`, the file's end, or `body`'s stop).
    ///
    /// Every read starts at a multiple of 4 KiB into a buffer aligned to 4 KiB, and asks for a
    /// multiple of 4 KiB, so `fd` may be opened with `O_DIRECT` (a FUSE client refuses anything
    /// else with EINVAL). The bytes before `start` in the first piece are read and not handed
    /// over; nothing past `end` rounded up to 4 KiB is read (a buffered read past it would put
    /// pages in the cache that another client may write next).
    public static func stream(_ fd: Int32, from start: Int64 = 0, to end: Int64? = nil,
                              _ body: (UnsafeRawBufferPointer) throws -> Bool) rethrows -> (bytes: Int64, errno: Int32?) {
        let size = 1 << 20
        let align = 4096
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: align)
        defer { buffer.deallocate() }
        var offset = start
        while end.map({ offset < $0 }) ?? true {
            let at = offset - offset % Int64(align)
            let skip = Int(offset - at)
            let want = end.map { min(size, (Int($0 - at) + align - 1) / align * align) } ?? size
            let n = restartingAfterSignal { pread(fd, buffer.baseAddress, want, off_t(at)) }
            if n < 0 { return (offset - start, errno) }
            if n <= skip { break }
            let usable = end.map { min(n - skip, Int($0 - offset)) } ?? (n - skip)
            offset += Int64(usable)
            guard try body(UnsafeRawBufferPointer(rebasing: buffer[skip..<(skip + usable)])) else { break }
        }
        return (offset - start, nil)
    }

    /// Creates a directory and any missing parents with `mode`; one that exists is fine.
    public static func makeDirectory(_ path: String, mode: mode_t) throws {
        if mkdir(path, mode) == 0 || errno == EEXIST { return }
        if errno == ENOENT {
            try makeDirectory((path as NSString).deletingLastPathComponent, mode: mode)
            if mkdir(path, mode) == 0 || errno == EEXIST { return }
        }
        throw FileError(path: path, operation: "create directory", errno: errno)
    }
}
