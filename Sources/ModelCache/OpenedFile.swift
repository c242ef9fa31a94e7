import Foundation
import SharedFiles

/// A file of the cache opened, and its facts read through the same descriptor, each step retried
/// on a stale handle: the one opening of staging files and parts. On a failure nothing is left
/// open, and the error names the file and the step.
struct OpenedFile {
    let fd: Int32
    let facts: stat

    /// Opens `path` with `flags` (and `mode`, when it creates the file); `opening` and `reading`
    /// say the two steps in an error's words ("open part", "read the size of part").
    init(_ path: String, flags: Int32, mode: mode_t = 0, opening: String, reading: String) throws {
        let fd = SharedFS.retry { open(path, flags, mode) }
        guard fd >= 0 else { throw CacheError.io(path: path, operation: opening, errno: errno) }
        var st = stat()
        guard SharedFS.retry({ fstat(fd, &st) }) == 0 else {
            let code = errno
            close(fd)
            throw CacheError.io(path: path, operation: reading, errno: code)
        }
        self.fd = fd
        self.facts = st
    }
}
