// CachePins - `speech cache pin` / `unpin`: models the size cap never evicts. A pin is an empty
// file `<base>/pins/<org>/<name>`, so every node sharing the cache base sees it, and it outlives
// the model directory (a model may be pinned before it is downloaded).
import Foundation
import HubTypes
import ModelCache
import SharedFiles

extension CacheAdmin {
    /// `<base>/pins`: one empty file per pinned repo, `<org>/<name>`.
    public var pinsDirectory: String { base.path + "/pins" }

    func pinPath(_ repo: RepoID) -> String { "\(pinsDirectory)/\(repo.org)/\(repo.name)" }

    /// Pins `repo`: prune and `speech-fetchd --max-cache-size` never evict it (its native model
    /// directory and its revisions in a huggingface_hub cache). Returns false when it was pinned already.
    @discardableResult
    public func pin(repo: String) throws -> Bool {
        let id = try RepoID(repo)
        let path = pinPath(id)
        for folder in [pinsDirectory, "\(pinsDirectory)/\(id.org)"] where mkdir(folder, 0o755) != 0 && errno != EEXIST {
            throw CacheAdminError.io(path: folder, operation: "create", errno: errno)
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0 {
            if errno == EEXIST { return false }
            throw CacheAdminError.io(path: path, operation: "create", errno: errno)
        }
        close(fd)
        return true
    }

    /// Unpins `repo`; false when it was not pinned.
    @discardableResult
    public func unpin(repo: String) throws -> Bool {
        let id = try RepoID(repo)
        let path = pinPath(id)
        guard unlink(path) == 0 else {
            if errno == ENOENT { return false }
            throw CacheAdminError.io(path: path, operation: "delete", errno: errno)
        }
        rmdir("\(pinsDirectory)/\(id.org)")  // the org folder, when this was its last pin
        return true
    }

    /// Every pinned repo id (`org/name`), sorted.
    public func pinnedRepos() -> [String] {
        var result: [String] = []
        for org in FileTree.names(pinsDirectory) {
            for name in FileTree.names("\(pinsDirectory)/\(org)") {
                if let id = try? RepoID("\(org)/\(name)") { result.append(id.description) }
            }
        }
        return result.sorted()
    }
}
