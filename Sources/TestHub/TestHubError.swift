// TestHubError - what can go wrong setting up the test Hub, said so the test author can fix it.
import Foundation

public enum TestHubError: Error, CustomStringConvertible, Equatable {
    /// A repo id that is not `org/name` with plain, non-hidden parts.
    case invalidRepoID(String)
    /// A file path that is absolute, empty, or has `.`/`..`/empty components.
    case invalidPath(repo: String, path: String)
    /// Writing a repo file failed.
    case cannotWrite(path: String, errno: Int32)
    /// Opening a listening socket on a loopback address failed.
    case cannotListen(host: String, port: UInt16, errno: Int32)
    /// A listening address that is not IPv4 loopback (127.x.y.z): the test Hub serves this machine only.
    case notLoopback(String)

    public var description: String {
        switch self {
        case .invalidRepoID(let id):
            return "'\(id)' is not a repo id: use org/name, two plain folder names"
        case .invalidPath(let repo, let path):
            return "'\(path)' cannot be a file of \(repo): use a relative path without '.', '..' or empty parts"
        case .cannotWrite(let path, let code):
            return "cannot write \(path): \(String(cString: strerror(code)))"
        case .cannotListen(let host, let port, let code):
            return "cannot listen on \(host):\(port): \(String(cString: strerror(code))); pick another port or 0 for a free one"
        case .notLoopback(let host):
            return "'\(host)' is not an IPv4 loopback address: the test Hub listens on 127.x.y.z only (e.g. 127.0.0.2)"
        }
    }
}
