// TargetAnchor - a record's model directory held open while a pass writes into it (docs/protocol.md,
// "Writes follow no link"). A target is judged by its real path (RequestTargets), but a path
// judged once can lead elsewhere later: a folder of it swapped for a symbolic link to a directory
// outside the cache would take the writes there. So every pass that writes into a target (the
// planner's staging file and lock, the splicer's parts, sidecar and final rename, a settled
// request's ref) first opens the judged real path one component at a time with
// openat(O_NOFOLLOW), making missing folders with mkdirat under the folder just opened, and
// writes through `/proc/self/fd/<fd>`: the kernel resolves that name to the directory opened, not
// to whatever the path names by then. A component that became a link (or a file) fails the
// open, and the pass writes nothing.
import CFileOps
import Foundation
import ModelCache

/// One model directory, open for one pass's writes.
public final class TargetAnchor: @unchecked Sendable {
    /// The open directory (O_PATH: no read permission is needed to write through it).
    public let fd: Int32
    /// `/proc/self/fd/<fd>`: the directory opened, whatever its path names now.
    public let path: String
    /// The real path it was opened by, for messages.
    public let realPath: String
    /// The record's model directory, reached through `path`.
    public let directory: ModelDirectory

    private init(fd: Int32, realPath: String, record: ModelDirectoryRecord) {
        self.fd = fd
        path = "/proc/self/fd/\(fd)"
        self.realPath = realPath
        directory = ModelDirectory.at(path, layout: record.layout ?? .native, commit: record.commit)
    }

    deinit { close(fd) }

    /// `text` with the anchor's name told as the directory's real path (a reason the user reads).
    public func told(_ text: String) -> String { text.replacingOccurrences(of: path, with: realPath) }

    /// Opens `realPath` (absolute, judged) one component at a time, following no link, and makes
    /// the missing folders at its end when `creating`; nil and the errno when a component is a link, not a
    /// directory, or cannot be opened or made.
    static func open(realPath: String, record: ModelDirectoryRecord, creating: Bool) -> Result<TargetAnchor, TargetAnchorError> {
        let flags = sf_o_path() | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        var fd = Glibc.open("/", sf_o_path() | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(TargetAnchorError(realPath: realPath, component: "/", errno: errno)) }
        var walked = ""
        for component in realPath.split(separator: "/").map(String.init) {
            walked += "/" + component
            var next = openat(fd, component, flags)
            if next < 0 && errno == ENOENT && creating {
                if mkdirat(fd, component, 0o755) != 0 && errno != EEXIST {
                    let code = errno
                    close(fd)
                    return .failure(TargetAnchorError(realPath: realPath, component: walked, errno: code))
                }
                next = openat(fd, component, flags)
            }
            let code = errno
            close(fd)
            guard next >= 0 else { return .failure(TargetAnchorError(realPath: realPath, component: walked, errno: code)) }
            fd = next
        }
        // The staging folder is reached by name below the directory opened: one planted there as
        // a link (or a file) is refused. A look, not a descriptor: a swap between this look and
        // the pass's writes still leads them (docs/protocol.md says so).
        var staging = stat()
        if fstatat(fd, ModelLayout.staging, &staging, AT_SYMLINK_NOFOLLOW) == 0, (staging.st_mode & S_IFMT) != S_IFDIR {
            close(fd)
            return .failure(TargetAnchorError(realPath: realPath, component: walked + "/" + ModelLayout.staging, errno: ELOOP))
        }
        return .success(TargetAnchor(fd: fd, realPath: realPath, record: record))
    }
}

/// Why a judged target could not be opened for writing.
public struct TargetAnchorError: Error, Sendable, CustomStringConvertible {
    public let realPath: String
    /// The component that failed, as a path.
    public let component: String
    public let errno: Int32

    /// A link or a file where a folder was judged: the target changed under the daemon.
    public var isReplaced: Bool { errno == ELOOP || errno == ENOTDIR }

    public var description: String {
        isReplaced
            ? "its target \(realPath) was judged a plain folder, but \(component) is now a symbolic link or a file (it was replaced after it was judged), so nothing was written there: make it a plain folder again (no link) and ask again"
            : "its target \(realPath) cannot be opened at \(component) (\(String(cString: strerror(errno))))"
    }
}

extension Spool {
    /// The model directory of `record`, judged (`RequestTargets`, once per process) and opened by
    /// its judged real path for one pass's writes (`TargetAnchor`). `.failure` with the reason
    /// when it is refused or its path now leads through a link. `creating`: missing folders are made
    /// (a pass about to write); else a missing one is a transient refusal (nothing to look at).
    public func anchor(_ record: ModelDirectoryRecord, creating: Bool = true) -> Result<TargetAnchor, TargetAnchorRefusal> {
        let judged: (refusal: String?, resolved: String?) = targets.map { $0.cachedJudgement(record) }
            ?? (nil, RequestTargets.resolve(record.modelDir))
        if let refusal = judged.refusal { return .failure(TargetAnchorRefusal(reason: refusal, replaced: false)) }
        guard let real = judged.resolved else {
            return .failure(TargetAnchorRefusal(reason: "its target \(record.modelDir) is not an absolute path of plain folder names", replaced: false))
        }
        switch TargetAnchor.open(realPath: real, record: record, creating: creating) {
        case .success(let anchor): return .success(anchor)
        case .failure(let error):
            return .failure(TargetAnchorRefusal(reason: "\(error)", replaced: error.isReplaced, transient: !error.isReplaced,
                                                retryable: [ESTALE, EIO, EINTR, ENOENT].contains(error.errno)))
        }
    }
}

/// Why a pass does not write into a record's target.
public struct TargetAnchorRefusal: Error, Sendable {
    public let reason: String
    /// The judged path now leads through a link or a file.
    public let replaced: Bool
    /// Could not open it now (permissions, I/O): not a verdict on the target.
    public var transient = false
    /// A stale handle, I/O error or a folder not there (not made): the next pass may succeed.
    public var retryable = false

    /// A record of this refusal: a target that could not be opened is this machine's failure,
    /// any other a refusal of the target.
    public var failure: FailureRecord { FailureRecord(transient ? .local : .refused, reason) }
}
