// ModelDirectory - one model's folder in the cache: final files, the manifest, completeness checks.
import CFileOps
import Foundation
import HubTypes
import SharedFiles

/// A model's directory. Final files sit at their repo paths; `.speech-fetch.json` records the
/// snapshot they came from (so offline calls know the file list); `.incomplete/` holds staging.
public struct ModelDirectory: Sendable {
    public let url: URL
    /// `url.path`, kept: joining strings is far cheaper than URL appending, and an offline
    /// check joins one per file (docs/benchmarks.md, scenario 5).
    public let path: String
    /// Set for a huggingface_hub repo folder (`models--org--name`, HubCache): the commit whose
    /// snapshot this directory reads and writes. Files then live in `blobs/<etag>`, reached
    /// through `snapshots/<commit>/<path>`. Nil: the native layout, files at their repo paths.
    public let hubCommit: String?

    public init(_ url: URL) {
        self.url = url.standardizedFileURL
        let path = self.url.path
        self.path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        hubCommit = nil
    }

    /// A huggingface_hub repo folder, at one commit's snapshot.
    public init(hubRepoFolder url: URL, commit: String) {
        self.url = url.standardizedFileURL
        let path = self.url.path
        self.path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        hubCommit = commit
    }

    /// The same folder at another commit (a huggingface_hub folder), or itself (native).
    public func atCommit(_ commit: String) -> ModelDirectory {
        hubCommit == nil ? self : ModelDirectory(hubRepoFolder: url, commit: commit)
    }

    /// The directory a caller loads files from: the model directory, or the snapshot.
    public var filesURL: URL {
        guard let hubCommit else { return url }
        return URL(fileURLWithPath: HubRepoFolder(url).snapshotPath(hubCommit), isDirectory: true)
    }

    public var stagingDirectory: URL { url.appendingPathComponent(ModelLayout.staging, isDirectory: true) }

    /// Where a repo file lives once final. The path was validated by HubClient.
    public func finalURL(_ repoPath: String) -> URL { URL(fileURLWithPath: finalPath(repoPath)) }

    /// `finalURL(_:)` as a path string.
    public func finalPath(_ repoPath: String) -> String {
        guard let hubCommit else { return path + "/" + repoPath }
        return HubRepoFolder(url).pointerPath(hubCommit, repoPath)
    }

    /// True when the final file exists as a regular file of the expected size and, when it
    /// carries the content id it was finalized with, that id is this file's (no hashing): a
    /// re-exported file of the same size is not mistaken for the one on disk.
    public func isComplete(_ file: RepoFile) -> Bool { isComplete(file, directoryFD: -1) }

    /// `isComplete(_:)` with the directory open as `directoryFD` (-1: none), so that a check of
    /// many files looks each up from here rather than walking the whole path every time.
    func isComplete(_ file: RepoFile, directoryFD: Int32) -> Bool {
        if hubCommit != nil { return hubIsComplete(file) }
        let path = finalPath(file.path)
        var st = stat()
        // Looked at again on a stale handle (a network filesystem after another client's rename).
        let found = SharedFS.retry { directoryFD >= 0 ? fstatat(directoryFD, file.path, &st, AT_SYMLINK_NOFOLLOW) : lstat(path, &st) }
        guard found == 0, (st.st_mode & S_IFMT) == S_IFREG, Int64(st.st_size) == file.size else { return false }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 128) { buffer in
            let n = directoryFD >= 0
                ? sf_get_xattr_at(directoryFD, file.path, path, ModelDirectory.contentIDAttribute, buffer.baseAddress, buffer.count)
                : sf_get_xattr(path, ModelDirectory.contentIDAttribute, buffer.baseAddress, buffer.count)
            guard n > 0 else { return true }  // no id recorded (imported, shipped, or no xattr support)
            let recorded = UnsafeRawBufferPointer(start: buffer.baseAddress, count: n)
            return ModelDirectory.contentID(file).utf8.elementsEqual(recorded)
        }
    }

    /// The extended attribute a final file carries: its sha256 (LFS) or git blob id.
    public static let contentIDAttribute = "user.speech-fetch.id"

    public static func contentID(_ file: RepoFile) -> String { file.sha256 ?? file.blobID }

    /// Records a file's content id on it (best effort: filesystems without user xattrs skip it).
    public static func recordContentID(_ file: RepoFile, fd: Int32) {
        let id = Array(contentID(file).utf8)
        guard !id.isEmpty else { return }
        _ = id.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { sf_set_xattr(fd, contentIDAttribute, $0.baseAddress, $0.count) }
        }
    }

    // MARK: Manifest

    /// Records the snapshot (atomically: temp file, fsync, rename).
    public func writeManifest(_ snapshot: RepoSnapshot) throws {
        try ModelDirectory.makeDirectories(url.path)  // a CacheError naming the path, not Foundation's text
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(snapshot)
        try CacheError.saying { try AtomicFile.write(data, to: url.appendingPathComponent(ModelLayout.manifest)) }
    }

    /// The manifest; in a huggingface_hub folder, ours when it is of this commit, else the
    /// listing huggingface_hub recorded for the commit (`trees/<commit>.json`).
    public func readManifest() -> RepoSnapshot? {
        guard let data = FileManager.default.contents(atPath: path + "/" + ModelLayout.manifest),
              let snapshot = RepoSnapshot.decode(data), hubCommit == nil || snapshot.commit == hubCommit
        else { return hubCommit == nil ? nil : readTreeListing() }
        return snapshot
    }

    // MARK: Offline look-up

    /// What the call needs that is not on disk, judged without the network: from the manifest when
    /// there is one, else from the selection's literal paths and globs over the files present.
    /// Shard indexes on disk add every shard they name.
    public func missingOffline(_ selection: FileSelection, repo: String) -> MissingFiles {
        offlineCheck(selection, repo: repo).missing
    }

    /// What an offline call finds: the files it needs that are missing, the ones present, and the
    /// commit they came from. One read of the manifest and one look at each file.
    public func offlineCheck(_ selection: FileSelection, repo: String) -> OfflineCheck {
        if let snapshot = readManifest(), snapshot.repo == repo || (hubCommit != nil && snapshot.repo.isEmpty) {
            let directoryFD = hubCommit == nil ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1  // -1: look up full paths
            defer { if directoryFD >= 0 { close(directoryFD) } }
            guard let selected = try? FilePlan.select(snapshot.files, selection, repo: repo) else {
                // A named file the manifest does not list: that one is missing, the named files on disk are not.
                let listed = Dictionary(snapshot.files.map { (PathBytes($0.path), $0) }, uniquingKeysWith: { a, _ in a })
                let named = selection.literalPaths
                return OfflineCheck(missing: .named(named.filter { listed[PathBytes($0)].map { !isComplete($0, directoryFD: directoryFD) } ?? true }),
                                    present: named.filter { listed[PathBytes($0)].map { isComplete($0, directoryFD: directoryFD) } ?? false },
                                    commit: snapshot.commit, revision: snapshot.revision)
            }
            var complete: [PathBytes: Bool] = [:]  // bytes: `é` in NFC and in NFD are two files
            func isHere(_ file: RepoFile) -> Bool {
                if let known = complete[PathBytes(file.path)] { return known }
                let here = isComplete(file, directoryFD: directoryFD)
                complete[PathBytes(file.path)] = here
                return here
            }
            var missing = selected.filter { ShardIndex.isIndexPath($0.path) && !isHere($0) }.map(\.path)
            let indexes = selected.filter { ShardIndex.isIndexPath($0.path) && isHere($0) }
                .compactMap { try? ShardIndex(contentsOf: finalURL($0.path), path: $0.path) }
            guard let needed = try? FilePlan.applyIndexes(indexes, selected: selected, all: snapshot.files, repo: repo,
                                                             keepUnnamed: hubCommit != nil) else {
                missing = indexes.flatMap(\.shards).filter { access(finalPath($0), F_OK) != 0 }
                return OfflineCheck(missing: .named(missing.sorted()), present: selected.filter { isHere($0) }.map(\.path),
                                    commit: snapshot.commit, revision: snapshot.revision)
            }
            missing += needed.filter { !ShardIndex.isIndexPath($0.path) && !isHere($0) }.map(\.path)
            let present = selected.filter { isHere($0) }.map(\.path)
            var check = OfflineCheck(missing: .named(missing.sorted()), present: present, commit: snapshot.commit, revision: snapshot.revision)
            check.unmatched = ModelDirectory.unmatched(selection, among: snapshot.files.map(\.path))
            return check
        }
        // No manifest, or another repo's (e.g. a bundle shipped with an app): judge by what is present.
        let present = listFiles()
        return OfflineCheck(missing: missingWithoutManifest(selection, present: present),
                            present: present.filter { selection.matches($0) }.sorted(), commit: nil)
    }

    /// The globs of `selection` that match none of `paths` (the repo's listing). Like
    /// `hf download --include`, a glob that matches no file of the repo is not a miss: the call
    /// warns and goes on with what the rest selects.
    static func unmatched(_ selection: FileSelection, among paths: [String]) -> [String] {
        selection.patterns.filter { pattern in
            FileSelection.isPattern(pattern) && !paths.contains { FileSelection.glob(pattern, matches: $0) }
        }
    }

    private func missingWithoutManifest(_ selection: FileSelection, present: Set<String>) -> MissingFiles {
        // Nothing named and nothing here: no listing says which files the repo has.
        if selection.isAll && present.isEmpty { return .anyFile }
        var missing = selection.literalPaths.filter { !present.contains($0) }
        // Without a manifest the repo's listing is unknown: a glob that matches no file on disk
        // may name files not fetched (a bundle without its weights), so it is a miss, not the
        // warning a glob the listing does not match gets.
        for pattern in selection.patterns where FileSelection.isPattern(pattern) {
            if !present.contains(where: { FileSelection.glob(pattern, matches: $0) }) { missing.append(pattern) }
        }
        for indexPath in present where ShardIndex.isIndexPath(indexPath) && selection.matches(indexPath) {
            guard let index = try? ShardIndex(contentsOf: finalURL(indexPath), path: indexPath) else {
                missing.append(indexPath)
                continue
            }
            missing += index.shards.filter { !present.contains($0) }
        }
        return .named(Array(Set(missing)).sorted())
    }

    /// Repo paths of the final files present: the cache's own names at the top level
    /// (`ModelLayout.isBookkeeping`: staging, manifest and its temps, use markers) are left out,
    /// so a folder holding only those is empty.
    public func listFiles() -> Set<String> {
        if hubCommit != nil { return hubListFiles() }
        let entries = FileTree.walk(path, maxDepth: ModelDirectory.maxWalkDepth, followingRootLink: true) { relative, _ in
            !relative.contains("/") && ModelLayout.isBookkeeping(relative)
        }
        return Set(entries.filter { $0.facts.isRegular }.map(\.path))
    }
}

/// The result of `ModelDirectory.offlineCheck`.
public struct OfflineCheck: Sendable {
    /// What the call needs that is not final on disk.
    public let missing: MissingFiles
    /// Repo paths of the selected files that are final on disk.
    public let present: [String]
    /// The commit the manifest records, when there is one.
    public let commit: String?
    /// The revision (branch, tag or commit) the manifest records as resolved to `commit`.
    public let revision: String?
    /// Globs of the selection that match no file of the manifest's listing (the repo at the
    /// cached commit). A warning, not a miss (docs/cli.md, `--include`).
    public var unmatched: [String] = []

    public init(missing: MissingFiles, present: [String], commit: String?, revision: String? = nil) {
        self.missing = missing
        self.present = present
        self.commit = commit
        self.revision = revision
    }
}
