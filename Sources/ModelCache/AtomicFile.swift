// AtomicFile - small files published whole: write a temp file, fsync, close, rename.
import Foundation

public enum AtomicFile {
    /// Writes `data` to `url` so readers see either the old file or the new one, never a mix.
    public static func write(_ data: Data, to url: URL, mode: mode_t = 0o644) throws {
        var tmp = url
        // A fresh name on every attempt: a create that failed with a stale handle may still
        // have made its file.
        let fd = SharedFS.retry {
            tmp = url.deletingLastPathComponent()
                .appendingPathComponent(ModelLayout.tempName(of: url.lastPathComponent, pid: getpid(), n: UInt32.random(in: 0...UInt32.max)))
            return open(tmp.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
        }
        guard fd >= 0 else { throw CacheError.io(path: tmp.path, operation: "create", errno: errno) }
        var ok = false
        defer { if !ok { unlink(tmp.path) } }
        let written = data.withUnsafeBytes { buf -> Int in
            var off = 0
            while off < buf.count {
                let n = Glibc.write(fd, buf.baseAddress! + off, buf.count - off)
                if n < 0 { if errno == EINTR { continue }; return -1 }
                off += n
            }
            return off
        }
        guard written == data.count, fsync(fd) == 0 else {
            let code = errno
            close(fd)
            throw CacheError.io(path: tmp.path, operation: "write", errno: code)
        }
        guard close(fd) == 0 else { throw CacheError.io(path: tmp.path, operation: "close", errno: errno) }
        guard rename(tmp.path, url.path) == 0 else { throw CacheError.io(path: url.path, operation: "rename into", errno: errno) }
        ok = true
    }
}
