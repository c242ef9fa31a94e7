// HubModelDirectory - a model directory in huggingface_hub's layout (ModelDirectory with a hubCommit):
// its blobs by etag, snapshot pointers, refs and tree listing, written and checked; every name in
// the repo folder is HubRepoFolder's.
//
// A file is final when `snapshots/<commit>/<path>` is a relative symlink to `blobs/<etag>` of
// the right size. A blob appears only by rename (of a verified staging file, or one that
// huggingface_hub wrote), under huggingface_hub's own blob lock; the pointer is made after the
// blob, by renaming a symlink made in `.incomplete/`, so no reader sees a dangling pointer or a
// half-written blob. docs/protocol.md, "The huggingface_hub layout".
import Digest
import Foundation
import HubTypes
import SharedFiles

extension ModelDirectory {
    /// This directory as a huggingface_hub repo folder: the names of its layout.
    public var hubFolder: HubRepoFolder { HubRepoFolder(url) }

    /// `<repo folder>/blobs/<etag>`.
    public func blobPath(_ file: RepoFile) -> String { hubFolder.blobPath(ModelDirectory.contentID(file)) }

    /// `<hub>/.locks/models--<org>--<name>/<etag>.lock`, huggingface_hub's lock for that blob.
    public func blobLockPath(_ file: RepoFile) -> String { hubFolder.blobLockPath(ModelDirectory.contentID(file)) }

    /// What the pointer holds: `../../blobs/<etag>`, one more `../` per folder of the repo path.
    public static func pointerTarget(_ file: RepoFile) -> String {
        HubRepoFolder.pointerTarget(repoPath: file.path, contentID: contentID(file))
    }

    /// The pointer is exactly the relative link to this content's blob (`pointerTarget`) and the
    /// blob is a regular file of the expected size (a pointer that is a plain file, as
    /// huggingface_hub makes where symlinks fail, is judged by size). An absolute pointer, or
    /// one that leaves the repo folder, is not complete, whatever it points at. Each look is made
    /// again on a stale handle, as the native check's (a network filesystem after another
    /// client's rename): a failed read is not a missing file.
    func hubIsComplete(_ file: RepoFile) -> Bool {
        let pointer = finalPath(file.path)
        var st = stat()
        guard SharedFS.retry({ lstat(pointer, &st) }) == 0 else { return false }
        if (st.st_mode & S_IFMT) == S_IFLNK {
            guard ModelDirectory.readLink(pointer) == ModelDirectory.pointerTarget(file) else { return false }
            // The blob itself, not the pointer: `blobs/` must be the repo folder's own.
            var folder = stat()
            guard SharedFS.retry({ lstat(hubFolder.blobsPath, &folder) }) == 0, (folder.st_mode & S_IFMT) == S_IFDIR,
                  SharedFS.retry({ lstat(blobPath(file), &st) }) == 0 else { return false }
        }
        return (st.st_mode & S_IFMT) == S_IFREG && Int64(st.st_size) == file.size
    }

    /// How deep a walk of a snapshot (or a model directory) goes: as deep as a repo path may be.
    public static let maxWalkDepth = RepoPath.maxDepth

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = Int(SharedFS.retry { Int32(truncatingIfNeeded: readlink(path, &buffer, buffer.count - 1)) })
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Repo paths under `snapshots/<commit>/` that are regular files or links to regular files,
    /// at most `maxWalkDepth` folders deep (`HubRepoFolder.snapshotEntries`: no link to a
    /// directory followed, each directory visited once).
    func hubListFiles() -> Set<String> {
        var result = Set<String>()
        for entry in hubFolder.snapshotEntries(hubCommit ?? "", maxDepth: ModelDirectory.maxWalkDepth) {
            var st = stat()
            if entry.facts.isRegular || (entry.facts.isSymlink && SharedFS.retry({ stat(entry.fullPath, &st) }) == 0 && (st.st_mode & S_IFMT) == S_IFREG) {
                result.insert(entry.path)
            }
        }
        return result
    }

    /// Installs a verified staging file as the file's blob and makes its pointer. Under the
    /// blob lock: a blob that is already there (huggingface_hub's, or an earlier run's) is kept
    /// when its size and digest are right, and the staging file is dropped; a wrong one is replaced.
    public func installBlob(from stagingPath: String, file: RepoFile) throws {
        let blob = blobPath(file)
        try ModelDirectory.makeDirectories(hubFolder.blobsPath)
        // At most 10 s: a finalizing splicer must not hang behind a huggingface_hub download of the
        // same blob (nil: no lock; renames alone keep the blob whole, the lock only saves work).
        let lock = HubBlobLock.acquire(blobLockPath(file), timeout: 10)
        defer { lock?.release() }
        if blobVerifies(file) {
            unlink(stagingPath)
        } else {
            guard rename(stagingPath, blob) == 0 else { throw CacheError.io(path: blob, operation: "rename into place", errno: errno) }
        }
        try linkPointer(file)
    }

    /// Puts an empty file in place (blob and pointer, or the plain file).
    public func placeEmptyFile(_ file: RepoFile) throws {
        guard hubCommit != nil else {
            let target = finalURL(file.path)
            try ModelDirectory.makeDirectories(target.deletingLastPathComponent().path)
            try CacheError.saying { try AtomicFile.write(Data(), to: target) }
            return
        }
        try ModelDirectory.makeDirectories(hubFolder.blobsPath)
        let lock = HubBlobLock.acquire(blobLockPath(file), timeout: 10)
        defer { lock?.release() }
        if !blobVerifies(file) { try CacheError.saying { try AtomicFile.write(Data(), to: URL(fileURLWithPath: blobPath(file))) } }
        try linkPointer(file)
    }

    /// Uses a blob that is already in the cache (huggingface_hub wrote it first) when its size
    /// and digest are right: makes the pointer and returns true. No blob, or a wrong one: false.
    /// Waits while huggingface_hub holds the blob's lock (it is writing that blob), unless
    /// cancelled, at most `lockWait` seconds; after a few seconds `onWaiting` says what for.
    /// - Throws: `CacheError.lockWaitExpired` when the lock is still held at the bound.
    public func adoptExistingBlob(_ file: RepoFile, lockWait: Double = 300, onWaiting: (String) -> Void = { _ in },
                                  isCancelled: () -> Bool = { false }) throws -> Bool {
        guard hubCommit != nil, !isCancelled() else { return false }
        let lock = try HubBlobLock.wait(blobLockPath(file), timeout: lockWait, noticeAfter: min(5, lockWait / 2),
                                        onWaiting: onWaiting, isCancelled: isCancelled)
        guard !isCancelled() else { return false }
        defer { lock?.release() }
        guard blobVerifies(file) else { return false }
        return (try? linkPointer(file)) != nil
    }

    /// The blob exists as a regular file of the right size whose content hashes to its name.
    func blobVerifies(_ file: RepoFile) -> Bool {
        let fd = open(blobPath(file), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int64(st.st_size) == file.size else { return false }
        guard (try? CryptoLibrary.load()) != nil else { return false }
        return ContentHasher.hash(fd, lfs: file.sha256 != nil, size: file.size)?.hex == ModelDirectory.contentID(file)
    }

    /// Makes `snapshots/<commit>/<path>` point at the blob: a symlink made in `.incomplete/`
    /// and renamed over the pointer (readers see the old pointer or the new one).
    func linkPointer(_ file: RepoFile) throws {
        let pointer = finalPath(file.path)
        let target = ModelDirectory.pointerTarget(file)
        if ModelDirectory.readLink(pointer) == target { return }
        try checkPlainFolders(to: file.path)
        try ModelDirectory.makeDirectories((pointer as NSString).deletingLastPathComponent)
        try ModelDirectory.makeDirectories(stagingDirectory.path)
        let temp = stagingPath(ModelLayout.pointerTempName(pid: getpid(), n: UInt32.random(in: 0...UInt32.max)))
        guard symlink(target, temp) == 0 else { throw CacheError.io(path: temp, operation: "create symlink", errno: errno) }
        guard rename(temp, pointer) == 0 else {
            let code = errno
            unlink(temp)
            throw CacheError.io(path: pointer, operation: "rename a symlink into", errno: code)
        }
        rmdir(stagingDirectory.path)  // fails harmlessly while anything is staged
    }

    /// Refuses to write a pointer through a folder of the snapshot that is a symbolic link (it
    /// would land outside the cache): every existing folder from `snapshots/<commit>/` down to
    /// the pointer's must be a plain directory.
    func checkPlainFolders(to repoPath: String) throws {
        var folder = filesURL.path
        for component in repoPath.split(separator: "/").dropLast() {
            folder += "/" + component
            var st = stat()
            guard lstat(folder, &st) == 0 else { return }  // made below, as a plain directory
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw CacheError.unsafeCacheEntry(path: folder, reason: "it is not a plain directory (a symbolic link would lead the pointer out of the cache)")
            }
        }
    }

    /// Records `refs/<revision>` = commit, as huggingface_hub does (no newline; nothing when the
    /// revision is the commit itself or the ref already says so). The snapshot folder must exist
    /// first: huggingface_hub's scan warns about a ref to a missing snapshot.
    public func recordRevision(_ revision: String) throws {
        guard let commit = hubCommit, revision != commit, Revision(revision) != nil else { return }
        try ModelDirectory.makeDirectories(filesURL.path)
        let ref = URL(fileURLWithPath: hubFolder.refPath(revision))
        // A ref that already names the commit is left alone (read with retries: on a network
        // filesystem a stale handle is not "no ref"), so readers on other nodes are not sent
        // after a renamed-over file.
        if let old = SharedFS.read(ref.path, limit: 4096).value, String(decoding: old, as: UTF8.self) == commit { return }
        try ModelDirectory.makeDirectories(ref.deletingLastPathComponent().path)
        // The temp file is made in the repo folder, not in refs/, where a scan would read it as a ref.
        let temp = URL(fileURLWithPath: hubFolder.refTempPath())
        try CacheError.saying { try AtomicFile.write(Data(commit.utf8), to: temp) }
        guard rename(temp.path, ref.path) == 0 else {
            let code = errno
            unlink(temp.path)
            throw CacheError.io(path: ref.path, operation: "rename into", errno: code)
        }
    }

    /// Writes `trees/<commit>.json`, huggingface_hub's record of the whole listing at a commit
    /// (format 1: per path its size, blob id, and for LFS files sha256 and size). With it,
    /// huggingface_hub skips listing the tree again and reports an incomplete snapshot offline
    /// instead of returning it. Written once per commit (a commit's listing never changes).
    public func writeTreeListing(_ snapshot: RepoSnapshot) throws {
        guard hubCommit != nil else { return }
        let target = URL(fileURLWithPath: hubFolder.treeListingPath(snapshot.commit))
        guard access(target.path, F_OK) != 0 else { return }
        var files: [String: Any] = [:]
        for file in snapshot.files {
            var entry: [String: Any] = ["size": file.size, "blob_id": file.blobID]
            if let sha256 = file.sha256 {
                entry["lfs_sha256"] = sha256
                entry["lfs_size"] = file.size
            }
            files[file.path] = entry
        }
        let data = try JSONSerialization.data(withJSONObject: ["format_version": 1, "files": files],
                                              options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        try ModelDirectory.makeDirectories(target.deletingLastPathComponent().path)
        try CacheError.saying { try AtomicFile.write(data, to: target, mode: 0o600) }  // huggingface_hub's mode for it
    }

    /// `trees/<commit>.json` as a snapshot (repo left empty: the listing does not name it).
    func readTreeListing() -> RepoSnapshot? {
        guard let commit = hubCommit, let data = FileManager.default.contents(atPath: hubFolder.treeListingPath(commit)),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              object["format_version"] as? Int == 1, let files = object["files"] as? [String: [String: Any]] else { return nil }
        var listed: [RepoFile] = []
        for (filePath, entry) in files {
            guard let size = (entry["size"] as? NSNumber)?.int64Value, let blobID = entry["blob_id"] as? String else { return nil }
            listed.append(RepoFile(path: filePath, size: (entry["lfs_size"] as? NSNumber)?.int64Value ?? size, blobID: blobID,
                                   sha256: entry["lfs_sha256"] as? String))
        }
        return RepoSnapshot(repo: "", revision: commit, commit: commit, files: listed.sorted { $0.path < $1.path })
    }

    static func makeDirectories(_ path: String) throws {
        try CacheError.saying { try FileIO.makeDirectory(path, mode: 0o755) }
    }
}
