// CacheLocation - where models live on disk: the cache base and each model's directory.
import Foundation
import HubTypes

public enum CacheLocation {
    /// `QWEN3_CACHE_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/qwen3-speech`.
    public static func defaultBase(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let dir = env["QWEN3_CACHE_DIR"], !dir.trimmingCharacters(in: .whitespaces).isEmpty {
            return URL(fileURLWithPath: dir, isDirectory: true)
        }
        if let xdg = env["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("qwen3-speech", isDirectory: true)
        }
        let home = env["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".cache/qwen3-speech", isDirectory: true)
    }

    /// `<base>/models/`: the model directories' root.
    public static func modelsRoot(base: URL) -> URL { base.appendingPathComponent("models", isDirectory: true) }

    /// `<base>/models/<org>/<name>/`.
    public static func modelDirectory(base: URL, repo: RepoID) -> URL {
        modelsRoot(base: base)
            .appendingPathComponent(repo.org, isDirectory: true)
            .appendingPathComponent(repo.name, isDirectory: true)
    }
}

extension CacheLocation {
    /// Checks that `url` can be (or become) a cache directory before anything is written there,
    /// so a mistake is an error naming the setting, not a raw file-system error later, and never
    /// a write somewhere else (an empty path is the current directory to the OS).
    /// - Parameters:
    ///   - role: the setting that named it, e.g. "the model directory (cacheDir, --cache-dir)".
    ///   - forWriting: also check that the directory (or the folder it will be made in) is writable.
    /// - Throws: `CacheError.unusableDirectory` saying what is wrong and what to do.
    public static func checkDirectory(_ url: URL, role: String, forWriting: Bool) throws {
        func refuse(_ reason: String) -> CacheError {
            .unusableDirectory(path: url.isFileURL ? url.path : url.absoluteString, role: role, reason: reason)
        }
        guard url.isFileURL else { throw refuse("it is not a file path; name a directory") }
        // (Foundation turns URL(fileURLWithPath: "") into the current directory, the same URL as
        // "."; the command lines refuse an empty option value before it becomes one.)
        guard !url.path.isEmpty else { throw refuse("an empty path would mean the current directory; name a directory") }
        let path = url.standardizedFileURL.path
        var st = stat()
        if lstat(path, &st) == 0 {
            if (st.st_mode & S_IFMT) == S_IFLNK {
                var target = stat()
                guard stat(path, &target) == 0 else {
                    let to = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?"
                    throw refuse("it is a symbolic link to \(to), which does not exist; create that directory or name another one")
                }
                st = target
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw refuse("it is \(kind(st.st_mode)), not a directory; name a directory (it is created if missing)")
            }
            if forWriting { try checkWritable(path, refuse) }
            return
        }
        let missing = errno
        guard missing == ENOENT || missing == ENOTDIR else {
            throw refuse("it cannot be looked at (\(String(cString: strerror(missing))))")
        }
        // Not there yet: the nearest folder that exists must be a directory it can be made in.
        var parent = (path as NSString).deletingLastPathComponent
        while !parent.isEmpty {
            var pst = stat()
            if stat(parent, &pst) == 0 {
                guard (pst.st_mode & S_IFMT) == S_IFDIR else {
                    throw refuse("it lies under \(parent), which is \(kind(pst.st_mode)), not a directory; name a path under a directory")
                }
                if forWriting { try checkWritable(parent, refuse) }
                return
            }
            var lst = stat()
            if lstat(parent, &lst) == 0 && (lst.st_mode & S_IFMT) == S_IFLNK {
                throw refuse("it lies under \(parent), a symbolic link to nothing; create its target or name another path")
            }
            if parent == "/" { return }
            parent = (parent as NSString).deletingLastPathComponent
        }
    }

    private static func checkWritable(_ path: String, _ refuse: (String) -> CacheError) throws {
        guard access(path, W_OK | X_OK) != 0 else { return }
        switch errno {
        case EROFS: throw refuse("\(path) is on a read-only file system; name a directory on a writable one")
        case EACCES, EPERM: throw refuse("\(path) is not writable by this user; fix its permissions or name another directory")
        default: throw refuse("\(path) cannot be written (\(String(cString: strerror(errno))))")
        }
    }

    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: return "a regular file"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFIFO: return "a named pipe"
        case S_IFSOCK: return "a socket"
        default: return "not a directory"
        }
    }
}
