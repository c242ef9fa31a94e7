// ModelDirectory - one model's folder in the cache: final files, the manifest, completeness checks.
import CFileOps
import Foundation
import HubClient

/// A model's directory. Final files sit at their repo paths; `.speech-fetch.json` records the
/// snapshot they came from (so offline calls know the file list); `.incomplete/` holds staging.
public struct ModelDirectory: Sendable {
    public let url: URL
    public static let manifestName = ".speech-fetch.json"

    public init(_ url: URL) { self.url = url.standardizedFileURL }

    public var path: String { url.path }
    public var stagingDirectory: URL { url.appendingPathComponent(".incomplete", isDirectory: true) }

    /// Where a repo file lives once final. The path was validated by HubClient.
    public func finalURL(_ repoPath: String) -> URL { url.appendingPathComponent(repoPath) }

    /// True when the final file exists as a regular file of the expected size and, when it
    /// carries the content id it was finalized with, that id is this file's (no hashing): a
    /// re-exported file of the same size is not mistaken for the one on disk.
    public func isComplete(_ file: RepoFile) -> Bool {
        let path = finalURL(file.path).path
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int64(st.st_size) == file.size else { return false }
        var buffer = [CChar](repeating: 0, count: 128)
        let n = sf_get_xattr(path, ModelDirectory.contentIDAttribute, &buffer, buffer.count)
        guard n > 0 else { return true }  // no id recorded (imported, shipped, or no xattr support)
        return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self) == ModelDirectory.contentID(file)
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
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try AtomicFile.write(try encoder.encode(snapshot), to: url.appendingPathComponent(ModelDirectory.manifestName))
    }

    public func readManifest() -> RepoSnapshot? {
        guard let data = FileManager.default.contents(atPath: url.appendingPathComponent(ModelDirectory.manifestName).path)
        else { return nil }
        return try? JSONDecoder().decode(RepoSnapshot.self, from: data)
    }

    // MARK: Offline look-up

    /// What the call needs that is not on disk, judged without the network: from the manifest when
    /// there is one, else from the selection's literal paths and globs over the files present.
    /// Shard indexes on disk add every shard they name.
    public func missingOffline(_ selection: FileSelection, repo: String) -> [String] {
        if let snapshot = readManifest(), snapshot.repo == repo {
            guard let selected = try? FilePlan.select(snapshot.files, selection, repo: repo) else {
                return selection.literalPaths
            }
            var missing = selected.filter { ShardIndex.isIndexPath($0.path) && !isComplete($0) }.map(\.path)
            let indexes = selected.filter { ShardIndex.isIndexPath($0.path) && isComplete($0) }
                .compactMap { try? ShardIndex(contentsOf: finalURL($0.path), path: $0.path) }
            guard let needed = try? FilePlan.applyIndexes(indexes, selected: selected, all: snapshot.files, repo: repo) else {
                return indexes.flatMap(\.shards).filter { !FileManager.default.fileExists(atPath: finalURL($0).path) }
            }
            missing += needed.filter { !ShardIndex.isIndexPath($0.path) && !isComplete($0) }.map(\.path)
            return missing.sorted()
        }
        // No manifest (e.g. a bundle shipped with an app): judge by what is present.
        let present = listFiles()
        var missing = selection.literalPaths.filter { !present.contains($0) }
        for pattern in selection.patterns where FileSelection.isPattern(pattern) {
            if !present.contains(where: { FileSelection.glob(pattern, matches: $0) }) { missing.append(pattern) }
        }
        if selection.isAll && present.isEmpty { missing.append("(any file)") }
        for indexPath in present where ShardIndex.isIndexPath(indexPath) && selection.matches(indexPath) {
            guard let index = try? ShardIndex(contentsOf: finalURL(indexPath), path: indexPath) else {
                missing.append(indexPath)
                continue
            }
            missing += index.shards.filter { !present.contains($0) }
        }
        return Array(Set(missing)).sorted()
    }

    /// Repo paths of the final files present (bookkeeping excluded).
    public func listFiles() -> Set<String> {
        var result = Set<String>()
        guard let walker = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else {
            return result
        }
        let prefix = url.path.hasSuffix("/") ? url.path : url.path + "/"
        for case let file as URL in walker {
            let name = file.lastPathComponent
            if name == ".incomplete" || name == ModelDirectory.manifestName { walker.skipDescendants(); continue }
            guard (try? file.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true else { continue }
            let full = file.standardizedFileURL.path
            if full.hasPrefix(prefix) { result.insert(String(full.dropFirst(prefix.count))) }
        }
        return result
    }
}
