// HFImport - `speech cache import-hf`: adopt models a huggingface_hub cache already holds, so
// nobody downloads the same weights twice.
//
// huggingface_hub keeps `hub/models--<org>--<name>/snapshots/<commit>/<path>` as symlinks into
// `../../blobs/<etag>`, where the etag is the sha256 of an LFS file or the git blob id of any
// other. Each file is checked (its size, and the content against a 64-hex blob name's sha256 or a
// 40-hex one's git blob id), then hard-linked into `<base>/models/<org>/<name>/<path>` (copied
// when the two caches are on different filesystems), and a manifest records the snapshot so
// later calls skip these files. Nothing in the huggingface_hub cache is written: blobs are
// opened read-only with O_NOATIME, and linking leaves their bytes and mtime as they were.
import Digest
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool

/// A file `importHF` did not adopt, and why.
public struct RefusedFile: Sendable, Equatable {
    public let path: String
    public let reason: String
}

/// One huggingface_hub repo's adoption.
public struct ImportedRepo: Sendable {
    public let repo: String
    /// The snapshot adopted (its folder name), or nil when the repo was passed over.
    public let commit: String?
    public let directory: URL
    /// Repo paths hard-linked, and copied (another filesystem, or linking not allowed).
    public var linked: [String] = []
    public var copied: [String] = []
    /// Files our cache already had with the same content.
    public var alreadyPresent: [String] = []
    /// Files not adopted, with the reason (failed check, unsafe path, in flight).
    public var refused: [RefusedFile] = []
    /// Bytes of the files linked or copied.
    public var bytesAdopted: Int64 = 0
    /// Set when the whole repo was passed over, with the reason.
    public var note: String?

    public var adopted: Int { linked.count + copied.count }
}

/// What `importHF` did.
public struct ImportReport: Sendable {
    /// The huggingface_hub cache read (`<HF_HOME>/hub`).
    public let hubDirectory: URL
    public var repos: [ImportedRepo] = []

    public var filesAdopted: Int { repos.reduce(0) { $0 + $1.adopted } }
    public var filesLinked: Int { repos.reduce(0) { $0 + $1.linked.count } }
    public var filesCopied: Int { repos.reduce(0) { $0 + $1.copied.count } }
    public var filesPresent: Int { repos.reduce(0) { $0 + $1.alreadyPresent.count } }
    public var filesRefused: Int { repos.reduce(0) { $0 + $1.refused.count } }
    public var bytesAdopted: Int64 { repos.reduce(0) { $0 + $1.bytesAdopted } }
}

extension CacheAdmin {
    /// Adopts every model of the huggingface_hub cache `<hfHome>/hub` (default: `HF_HUB_CACHE`, else
    /// `HubCache.homeDirectory`'s `hub`: `HF_HOME`, else `${XDG_CACHE_HOME:-~/.cache}/huggingface`).
    /// Throws `CacheAdminError.noHFCache` when `<hfHome>/hub` does not exist.
    public func importHF(hfHome: URL? = nil) throws -> ImportReport {
        try CryptoLibrary.load()
        // --hf-home names HF_HOME (its hub/); without it, huggingface_hub's own order (HF_HUB_CACHE first).
        let hub = (hfHome.map { $0.appendingPathComponent("hub", isDirectory: true) } ?? HubCache.defaultDirectory(environment))
            .standardizedFileURL
        guard FileTree.isDirectory(hub.path) else { throw CacheAdminError.noHFCache(path: hub.path) }
        var report = ImportReport(hubDirectory: hub)
        let view = SpoolView(existingSpool())
        for (entry, folder, repo) in HubRepoFolder.all(in: hub) where FileTree.isDirectory(folder.path) {
            guard let repo else {
                report.repos.append(ImportedRepo(repo: String(entry.dropFirst(HubRepoFolder.folderPrefix.count)), commit: nil,
                                                 directory: base, note: "not an org/name repo id; skipped"))
                continue
            }
            report.repos.append(importRepo(repo, from: folder, view: view))
        }
        return report
    }

    private func importRepo(_ repo: RepoID, from folder: HubRepoFolder, view: SpoolView) -> ImportedRepo {
        let directory = directory(for: repo)
        let existing = directory.readManifest().flatMap { $0.repo == repo.description ? $0 : nil }
        let snapshots = folder.snapshots()
        let refs = folder.refs()  // main first
        // The snapshot our cache already records, else the one main points at, else the newest.
        let commit = existing.map(\.commit).flatMap { snapshots.contains($0) ? $0 : nil }
            ?? refs.first(where: { snapshots.contains($0.commit) })?.commit
            ?? folder.newestSnapshot()
        guard let commit else {
            return ImportedRepo(repo: repo.description, commit: nil, directory: directory.url, note: "no snapshot; skipped")
        }
        var result = ImportedRepo(repo: repo.description, commit: commit, directory: directory.url)
        if let existing, existing.commit != commit, existing.files.contains(where: { directory.isComplete($0) }) {
            result.note = "the cache holds commit \(existing.commit.prefix(12)), the huggingface_hub cache \(commit.prefix(12)); "
                + "not mixing commits (`speech cache rm \(repo)` first to adopt it)"
            return result
        }
        let previous = existing?.commit == commit ? existing : nil
        let recorded = Dictionary((previous?.files ?? []).map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        let flight = inFlight(directory, view)
        var adopted: [RepoFile] = []

        for (path, entryPath, _) in folder.snapshotEntries(commit) {
            guard (try? RepoPath.validate(path, in: repo)) != nil else {
                result.refused.append(RefusedFile(path: path, reason: "not a safe repo path"))
                continue
            }
            guard let blob = folder.blob(ofPointer: entryPath) else {
                result.refused.append(RefusedFile(path: path, reason: "not a symlink to a blob named by its sha256 or git blob id; cannot be verified"))
                continue
            }
            let name = (blob as NSString).lastPathComponent
            let isLFS = name.utf8.count == 64
            guard let blobFacts = FileTree.facts(blob), blobFacts.isRegular else {
                result.refused.append(RefusedFile(path: path, reason: "its blob \(blob) is missing or not a regular file"))
                continue
            }
            let old = recorded[path]
            let record = RepoFile(path: path, size: blobFacts.size,
                                  blobID: isLFS ? (old?.sha256 == name ? old?.blobID ?? "" : "") : name,
                                  sha256: isLFS ? name : nil)
            if let old, old.size != record.size {
                result.refused.append(RefusedFile(path: path, reason: "size \(record.size) differs from the \(old.size) bytes our manifest records for this commit"))
                continue
            }
            // Already here: the same inode, or a file of the right size our manifest says has this content.
            let final = directory.finalURL(path).path
            if let ours = FileTree.facts(final), ours.isRegular, ours.size == record.size,
               (ours.device == blobFacts.device && ours.inode == blobFacts.inode)
                || (old.map { ($0.sha256 ?? $0.blobID) == (record.sha256 ?? record.blobID) } ?? false) {
                result.alreadyPresent.append(path)
                adopted.append(record)
                continue
            }
            if flight.isBusy(path) {
                result.refused.append(RefusedFile(path: path, reason: "a transfer is writing it"))
                continue
            }
            switch adopt(record, blob: blob, into: directory) {
            case .linked:
                result.linked.append(path)
                result.bytesAdopted += record.size
                adopted.append(record)
            case .copied:
                result.copied.append(path)
                result.bytesAdopted += record.size
                adopted.append(record)
            case .refused(let reason):
                result.refused.append(RefusedFile(path: path, reason: reason))
            }
        }
        guard !adopted.isEmpty else { return result }
        // The manifest: what our cache recorded for this commit, with the adopted files' records.
        let byPath = Dictionary(adopted.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        var files = (previous?.files ?? []).map { byPath[$0.path] ?? $0 }
        let listed = Set(files.map(\.path))
        files += adopted.filter { !listed.contains($0.path) }.sorted { $0.path < $1.path }
        let revision = refs.first { $0.commit == commit }?.name ?? previous?.revision ?? commit
        do {
            try directory.writeManifest(RepoSnapshot(repo: repo.description, revision: revision, commit: commit, files: files))
        } catch {
            result.note = "files adopted, but the manifest could not be written: \(error)"
        }
        return result
    }

    private enum Adoption { case linked, copied, refused(String) }

    /// Checks one blob and puts it at the file's final path, under the file's staging lock.
    private func adopt(_ file: RepoFile, blob: String, into directory: ModelDirectory) -> Adoption {
        guard let lock = StagingLock.acquire(file.path, in: directory, owner: owner, lease: lease) else {
            return .refused("a transfer is writing it")
        }
        defer { lock.release() }
        let fd = FileIO.openForLooking(blob)
        guard fd >= 0 else { return .refused("cannot open \(blob): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return .refused("\(blob) is not a regular file") }
        guard Int64(st.st_size) == file.size else {
            return .refused("its blob changed size while being read (\(st.st_size), expected \(file.size) bytes)")
        }
        // The content must be what the blob's name says.
        let expected = file.sha256 ?? file.blobID
        let digest = ContentHasher.hash(fd, lfs: file.sha256 != nil, size: file.size)
        guard let digest else { return .refused("\(blob) could not be read to the end") }
        guard digest.bytes == file.size else { return .refused("\(digest.bytes) bytes read, expected \(file.size)") }
        guard digest.hex == expected else {
            return .refused("content does not match its blob name: \(file.sha256 != nil ? "sha256" : "git blob id") \(digest.hex), expected \(expected)")
        }

        let staging = directory.stagingDirectory.path
        let temp = directory.stagingPath(ModelLayout.importName(file.path, pid: getpid()))
        unlink(temp)
        var method = Adoption.linked
        // Link the very inode that was hashed (through /proc/self/fd), not whatever the path names now.
        if linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, temp, AT_SYMLINK_FOLLOW) != 0 {
            guard [EXDEV, EPERM, EMLINK, ENOENT, EACCES, EOPNOTSUPP].contains(errno) else {
                return .refused("cannot link into \(staging): \(String(cString: strerror(errno)))")
            }
            if let problem = copy(fd, to: temp, expected: expected, file: file) {
                unlink(temp)
                return .refused(problem)
            }
            method = .copied
        } else {
            var linked = stat()
            guard lstat(temp, &linked) == 0, linked.st_ino == st.st_ino, linked.st_dev == st.st_dev else {
                unlink(temp)
                return .refused("the link made in \(staging) is not the blob's inode")
            }
        }
        let final = directory.finalURL(file.path)
        do {
            try FileManager.default.createDirectory(at: final.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            unlink(temp)
            return .refused("cannot create \(final.deletingLastPathComponent().path)")
        }
        guard rename(temp, final.path) == 0 else {
            let code = errno
            unlink(temp)
            return .refused("cannot rename into \(final.path): \(String(cString: strerror(code)))")
        }
        // A staged copy of the same file is now pointless.
        unlink(directory.stagingPath(ModelLayout.stagingName(file.path)))
        unlink(directory.stagingPath(ModelLayout.sidecarName(file.path)))
        return method
    }

    /// Copies the blob into a new file, hashing the bytes as they are written; nil when it verified.
    private func copy(_ source: Int32, to temp: String, expected: String, file: RepoFile) -> String? {
        let out = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard out >= 0 else { return "cannot create \(temp): \(String(cString: strerror(errno)))" }
        var hasher = ContentHasher(lfs: file.sha256 != nil, size: file.size)
        var failed = false
        let read = FileIO.stream(source) { chunk in
            hasher.update(chunk)
            if let code = FileIO.writeAll(out, chunk) {
                errno = code
                failed = true
                return false
            }
            return true
        }.errno == nil
        let synced = fsync(out) == 0
        let closed = close(out) == 0
        guard read, !failed, synced, closed else { return "copying into \(temp) failed: \(String(cString: strerror(errno)))" }
        let actual = hasher.finalizeHex()
        guard actual == expected else { return "the copy does not verify (\(actual), expected \(expected))" }
        guard FileTree.facts(temp)?.size == file.size else { return "the copy has the wrong size" }
        return nil
    }
}
