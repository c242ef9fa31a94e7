// MachineFiles - the small files the processes of one machine share in RAM beside LiveProgress's
// records (ReadyView's and NodeNamesView's listings): written whole by rename, and a lock under
// which one process makes a look for the others. Local to the machine: nothing here is on the
// shared filesystem, where flock is no rule (docs/protocol.md, "The rules", 1).
import Foundation
import SharedFiles

enum MachineFiles {
    /// Where the machine's processes share the record `name`: `.<name>` in `live`'s folder on
    /// /dev/shm (its locks and counters are `.<name>-<role>`).
    static func path(_ name: String, beside live: LiveProgress) -> String {
        live.directory + "/." + name
    }

    /// Replaces `path` with `text` in one rename: a reader sees the old file or the new one. The
    /// temp file is `<path>.<pid>.<thread>`; one a killed writer left is swept with its folder.
    static func replace(_ path: String, with text: String) {
        let temp = "\(path).\(getpid()).\(UInt64(bitPattern: Int64(Int(bitPattern: pthread_self()))))"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let bytes = Array(text.utf8)
        let wrote = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        if wrote == bytes.count && rename(temp, path) == 0 { return }
        unlink(temp)
    }

    /// Runs `body` holding `lockPath` (flock, exclusive): one process of the machine at a time.
    /// When the lock file cannot be opened or locked, `body` runs without it (the lock only saves
    /// looks; it decides nothing).
    static func oneAtATime<T>(_ lockPath: String, _ body: () -> T) -> T {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return body() }
        defer { close(fd) }  // releases the lock
        _ = FileIO.restartingAfterSignal { flock(fd, LOCK_EX) }
        return body()
    }
}
