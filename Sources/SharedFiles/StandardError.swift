// StandardError - a line to stderr that can fail without stopping the process.
//
// Foundation's `FileHandle.write` traps on any error, so a daemon whose log is full (ENOSPC,
// `--log /dev/full`) or whose stderr is a pipe nobody reads any more (EPIPE, with SIGPIPE
// ignored as systemd sets it) died of its next log line (SIGILL). A log line that cannot be
// written is dropped: there is nowhere left to say so, and the work goes on.
import Foundation

public enum StandardError {
    /// Writes `text` whole to file descriptor 2 (restarting after EINTR and short writes).
    /// Returns the errno of a failed write, nil when every byte went out.
    @discardableResult
    public static func write(_ text: String) -> Int32? {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { FileIO.writeAll(STDERR_FILENO, UnsafeRawBufferPointer($0)) }
    }
}
