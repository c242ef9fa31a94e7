// HubCache - a huggingface_hub cache on disk: where it is, its repo folders, refs and blob locks.
//
// The layout huggingface_hub reads (and writes itself):
//   <hub>/models--<org>--<name>/blobs/<etag>             file contents, named by sha256 (LFS) or git blob id
//   <hub>/models--<org>--<name>/snapshots/<commit>/<path>  relative symlinks to ../../blobs/<etag>
//   <hub>/models--<org>--<name>/refs/<revision>           the commit, no newline
//   <hub>/.locks/models--<org>--<name>/<etag>.lock        flock(2) locks, left in place
// speech-fetch adds only what huggingface_hub ignores: `.incomplete/` and `.speech-fetch.json` in
// the repo folder (its scan looks at `snapshots/` and `refs/` only).
import Foundation
import HubClient

public enum HubCache {
    /// huggingface_hub's own order: `HF_HUB_CACHE`, `HUGGINGFACE_HUB_CACHE`, `HF_HOME/hub`,
    /// `${XDG_CACHE_HOME:-~/.cache}/huggingface/hub`.
    public static func defaultDirectory(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        func set(_ name: String) -> String? {
            guard let v = env[name], !v.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
            return expandTilde(v, env)
        }
        if let dir = set("HF_HUB_CACHE") ?? set("HUGGINGFACE_HUB_CACHE") { return URL(fileURLWithPath: dir, isDirectory: true) }
        return homeDirectory(env).appendingPathComponent("hub", isDirectory: true)
    }

    /// `HF_HOME`, else `${XDG_CACHE_HOME:-~/.cache}/huggingface`.
    public static func homeDirectory(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let home = env["HF_HOME"], !home.trimmingCharacters(in: .whitespaces).isEmpty {
            return URL(fileURLWithPath: expandTilde(home, env), isDirectory: true)
        }
        let base = env["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ((env["HOME"] ?? NSHomeDirectory()) + "/.cache")
        return URL(fileURLWithPath: base, isDirectory: true).appendingPathComponent("huggingface", isDirectory: true)
    }

    private static func expandTilde(_ path: String, _ env: [String: String]) -> String {
        guard path == "~" || path.hasPrefix("~/") else { return path }
        return (env["HOME"] ?? NSHomeDirectory()) + path.dropFirst()
    }

    /// `models--<org>--<name>`: the repo's folder name in the cache.
    public static func folderName(_ repo: RepoID) -> String { "models--\(repo.org)--\(repo.name)" }

    /// `<hub>/models--<org>--<name>/`.
    public static func repoFolder(hub: URL, repo: RepoID) -> URL {
        hub.appendingPathComponent(folderName(repo), isDirectory: true)
    }

    /// A full commit id (40 lowercase hex digits), which names a snapshot without a ref.
    public static func isCommitHash(_ s: String) -> Bool {
        s.utf8.count == 40 && s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The commit `revision` names in a repo folder: itself when it is a commit id, else the
    /// content of `refs/<revision>`; nil when neither is known.
    public static func commit(forRevision revision: String, repoFolder: URL) -> String? {
        if isCommitHash(revision) { return revision }
        guard !revision.isEmpty, !revision.split(separator: "/").contains(where: { $0 == ".." || $0 == "." }),
              let data = FileManager.default.contents(atPath: repoFolder.path + "/refs/" + revision) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return isCommitHash(text) ? text : nil
    }

    /// Marks `hub` as a cache directory (the Cache Directory Tagging Standard's file, which
    /// huggingface_hub writes too), so backup tools skip it. Best effort.
    public static func tag(_ hub: URL) {
        let path = hub.path + "/CACHEDIR.TAG"
        guard access(path, F_OK) != 0 else { return }
        let text = "Signature: 8a477f597d28d172789f06886806bc55\n# A huggingface_hub cache, also written by speech-fetch.\n"
        try? FileManager.default.createDirectory(at: hub, withIntermediateDirectories: true)
        try? AtomicFile.write(Data(text.utf8), to: URL(fileURLWithPath: path))
    }
}

/// huggingface_hub's per-blob lock, `<hub>/.locks/models--<org>--<name>/<etag>.lock`, taken the
/// way its filelock takes it: open (created 0664 if absent, never deleted), `flock(LOCK_EX)`,
/// and start over when the file was unlinked before the lock was granted. flock is local to a
/// machine (and absent on some network filesystems): it keeps this node's huggingface_hub and
/// speech-fetch from writing the same blob at once, while correctness rests on rename.
public final class HubBlobLock: @unchecked Sendable {
    public let path: String
    private var fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    /// Waits until the lock is ours (polling with LOCK_NB, so a stop request is noticed), or
    /// returns nil when the file cannot be opened, the filesystem has no flock, or `timeout`
    /// seconds passed.
    public static func acquire(_ path: String, timeout: Double? = nil, isCancelled: () -> Bool = { false }) -> HubBlobLock? {
        let deadline = timeout.map { Date().addingTimeInterval($0) }
        let folder = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var pause: useconds_t = 5_000
        while !isCancelled() {
            // Created group-writable whatever the umask, as huggingface_hub does, so that every
            // user of a shared cache can wait on it; an existing one is opened as it is.
            var fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o664)
            if fd >= 0 {
                fchmod(fd, 0o664)
            } else if errno == EEXIST {
                fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
                if fd < 0 && errno == ENOENT { continue }  // removed meanwhile
            }
            guard fd >= 0 else { return nil }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                var st = stat()
                if fstat(fd, &st) == 0, st.st_nlink > 0 { return HubBlobLock(path: path, fd: fd) }
                close(fd)  // unlinked while we waited: lock the file that is there now
                continue
            }
            let code = errno
            close(fd)
            guard code == EWOULDBLOCK || code == EINTR else { return nil }  // ENOLCK, ENOSYS: no flock here
            if let deadline, Date() >= deadline { return nil }
            usleep(pause)
            pause = min(pause * 2, 200_000)
        }
        return nil
    }

    /// Unlocks and closes; the file stays, as huggingface_hub leaves it.
    public func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }
}
