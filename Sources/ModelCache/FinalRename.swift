// FinalRename - a verified staging file renamed to its repo path in the native layout, through
// descriptors of the folders on the way: each folder of the repo path (`weights/` of
// `weights/model.bin`) is opened from the model directory with openat(O_NOFOLLOW), made with
// mkdirat when missing, and the rename lands in the last one with renameat. A folder planted as
// a symbolic link in a model directory (by someone who can write it) cannot lead the file out
// (docs/protocol.md, "Writes follow no link").
import CFileOps
import Foundation

extension ModelDirectory {
    /// Renames the file at `source` to `repoPath` below this (native) model directory.
    /// - Throws: `CacheError.io` naming the folder that is a link (ELOOP), not a folder
    ///   (ENOTDIR) or cannot be made, or the rename's failure.
    func renameIntoPlace(from source: String, repoPath: String) throws {
        let target = finalPath(repoPath)
        var components = repoPath.split(separator: "/").map(String.init)
        guard let leaf = components.popLast() else {
            throw CacheError.io(path: target, operation: "rename into place", errno: EINVAL)
        }
        let flags = sf_o_path() | O_DIRECTORY | O_CLOEXEC
        var fd = open(path, flags)
        guard fd >= 0 else { throw CacheError.io(path: path, operation: "open the model directory of", errno: errno) }
        defer { close(fd) }
        var walked = path
        for component in components {
            walked += "/" + component
            var next = openat(fd, component, flags | O_NOFOLLOW)
            if next < 0 && errno == ENOENT {
                if mkdirat(fd, component, 0o755) != 0 && errno != EEXIST {
                    throw CacheError.io(path: walked, operation: "create directory", errno: errno)
                }
                next = openat(fd, component, flags | O_NOFOLLOW)
            }
            guard next >= 0 else {
                throw CacheError.io(path: walked, operation: "open (a symbolic link is not followed) the folder", errno: errno)
            }
            close(fd)
            fd = next
        }
        guard renameat(AT_FDCWD, source, fd, leaf) == 0 else {
            throw CacheError.io(path: target, operation: "rename into place", errno: errno)
        }
    }
}
