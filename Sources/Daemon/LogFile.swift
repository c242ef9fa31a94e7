// LogFile - a daemon process's log file (`speech-fetchd --log FILE`), reopened on SIGHUP so that
// logrotate can rename it away and the next line lands in a new file of the same name.
import Foundation
import Synchronization

/// Points stdout and stderr at a log file and reopens it on SIGHUP.
///
/// The reopen runs in the signal handler itself: open(2), dup2(2) and close(2) are
/// async-signal-safe, so the next line any thread writes goes to the new file whatever the
/// process is doing (a worker mid-range, a supervisor asleep on inotify). The handler also
/// counts the signal, and the supervisor's loop, woken by the EINTR, passes it on to its workers
/// (they inherited the old file) and logs the reopen. Without a log file, SIGHUP is counted and
/// otherwise ignored: a daemon whose stderr is the journal has nothing to reopen, and must not
/// die of the signal's default action.
public enum LogFile {
    /// Opens `path` for appending (created 0600 when missing, never through a symbolic link) as
    /// this process's stdout and stderr, and installs the SIGHUP handler that reopens it.
    /// - Throws: `LogFileError` naming the file when it cannot be opened.
    public static func attach(_ path: String) throws {
        guard let copy = strdup(path) else { throw LogFileError(path: path, errno: ENOMEM) }
        guard reopen(copy) else {
            let code = errno
            free(copy)
            throw LogFileError(path: path, errno: code)
        }
        logPath.store(UInt(bitPattern: copy), ordering: .releasing)  // kept for the process's life
        installHandler()
    }

    /// SIGHUP counted and ignored: for a daemon that logs to stderr as it was given.
    public static func ignoreHangups() { installHandler() }

    /// SIGHUPs received so far.
    public static var hangups: Int { hangupCount.load(ordering: .acquiring) }

    /// The errno of the last reopen that failed (0: none failed); the old file stays in use then.
    public static var lastFailure: Int32 { Int32(truncatingIfNeeded: failure.load(ordering: .relaxed)) }

    private static func installHandler() {
        _ = hangupCount.load(ordering: .relaxed)  // the globals exist before a handler can touch them
        _ = logPath.load(ordering: .relaxed)
        _ = failure.load(ordering: .relaxed)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            let saved = errno
            if let path = UnsafePointer<CChar>(bitPattern: logPath.load(ordering: .acquiring)) {
                failure.store(LogFile.reopen(path) ? 0 : Int(errno), ordering: .relaxed)
            }
            hangupCount.add(1, ordering: .releasing)
            errno = saved
        }
        action.sa_flags = SA_RESTART
        sigemptyset(&action.sa_mask)
        sigaction(SIGHUP, &action, nil)
    }

    /// open + dup2 onto 1 and 2 + close: async-signal-safe calls only.
    fileprivate static func reopen(_ path: UnsafePointer<CChar>) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        let ok = dup2(fd, STDOUT_FILENO) >= 0 && dup2(fd, STDERR_FILENO) >= 0
        if fd > STDERR_FILENO { close(fd) }
        return ok
    }
}

/// A log file that cannot be opened for appending.
public struct LogFileError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let errno: Int32

    public var description: String {
        "cannot open the log file \(path) for appending (\(String(cString: strerror(errno)))): give --log a file in a writable directory, not a symbolic link"
    }
}

private let logPath = Atomic<UInt>(0)
private let hangupCount = Atomic<Int>(0)
private let failure = Atomic<Int>(0)
