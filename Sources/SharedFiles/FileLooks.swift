// FileLooks - looking at files without changing them: a path's canonical spelling, and a
// read-only open that follows no link and leaves the access time alone.
import Foundation

extension FileTree {
    /// The path with symlinks resolved when it exists, else standardized: how two spellings of
    /// one folder are compared.
    public static func canonical(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        return URL(fileURLWithPath: path).standardizedFileURL.path
    }
}

extension FileIO {
    /// `O_NOATIME` (Linux; Swift's Glibc does not export it): reading a file we do not own the
    /// metadata of must not move its access time.
    #if os(Linux) && (arch(x86_64) || arch(arm64) || arch(i386) || arch(arm))
    static let noAtime: Int32 = 0o1000000
    #else
    static let noAtime: Int32 = 0
    #endif

    /// Opens a file read-only for looking only: no symlink followed, atime left alone where allowed.
    public static func openForLooking(_ path: String) -> Int32 {
        let flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC
        if noAtime != 0 {
            let fd = open(path, flags | noAtime)
            if fd >= 0 || errno != EPERM { return fd }  // EPERM: not our file; read it plainly
        }
        return open(path, flags)
    }
}
