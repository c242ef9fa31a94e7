// HubRepoFolder - one repo folder of a huggingface_hub cache, `<hub>/models--<org>--<name>/`: the
// one place that names and reads its layout (HubCache.swift's header draws it). The download
// path writes through it (HubModelDirectory.swift); `speech cache ls`, `import-hf` and the size
// cap read through it.
import Digest
import Foundation
import HubTypes
import SharedFiles

public struct HubRepoFolder: Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(_ url: URL) { self.url = url }

    /// `<hub>/models--<org>--<name>/`.
    public init(hub: URL, repo: RepoID) {
        self.url = hub.appendingPathComponent(HubRepoFolder.folderName(repo), isDirectory: true)
    }

    /// `models--`: what every repo folder's name starts with.
    public static let folderPrefix = "models--"

    /// `models--<org>--<name>`: the repo's folder name in the cache.
    public static func folderName(_ repo: RepoID) -> String { "\(folderPrefix)\(repo.org)--\(repo.name)" }

    /// `<hub>/.locks`: huggingface_hub's blob locks, a folder per repo.
    public static func locksRoot(hub: URL) -> String { hub.path + "/.locks" }

    /// The repo a folder name names (`models--<org>--<name>`), nil when it names none.
    public static func repo(folderName name: String) -> RepoID? {
        guard name.hasPrefix(folderPrefix) else { return nil }
        let pieces = name.dropFirst(folderPrefix.count).components(separatedBy: "--")
        guard pieces.count == 2 else { return nil }
        return try? RepoID("\(pieces[0])/\(pieces[1])")
    }

    /// The entries of `hub` named like repo folders (`models--…`), each with the repo it names
    /// (nil: not an org/name repo id).
    public static func all(in hub: URL) -> [(name: String, folder: HubRepoFolder, repo: RepoID?)] {
        FileTree.names(hub.path).filter { $0.hasPrefix(folderPrefix) }.map {
            ($0, HubRepoFolder(hub.appendingPathComponent($0, isDirectory: true)), repo(folderName: $0))
        }
    }

    /// `<repo folder>/blobs`.
    public var blobsPath: String { path + "/blobs" }
    /// `<repo folder>/blobs/<content id>`.
    public func blobPath(_ contentID: String) -> String { blobsPath + "/" + contentID }
    /// `<repo folder>/snapshots`, and `snapshots/<commit>` in it.
    public var snapshotsPath: String { path + "/snapshots" }
    public func snapshotPath(_ commit: String) -> String { snapshotsPath + "/" + commit }
    /// `<repo folder>/snapshots/<commit>/<repo path>`: a file's pointer (reads follow it).
    public func pointerPath(_ commit: String, _ repoPath: String) -> String { snapshotPath(commit) + "/" + repoPath }
    /// `<repo folder>/refs`, and `refs/<revision>` in it.
    public var refsPath: String { path + "/refs" }
    public func refPath(_ revision: String) -> String { refsPath + "/" + revision }
    /// `<repo folder>/trees`, and `trees/<commit>.json` in it.
    public var treesPath: String { path + "/trees" }
    public func treeListingPath(_ commit: String) -> String { treesPath + "/" + commit + ".json" }
    /// A temp file for a ref, in the repo folder (in refs/ a scan would read it as a ref).
    public func refTempPath() -> String { path + "/.ref.\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp" }
    /// `<hub>/.locks/models--<org>--<name>/<content id>.lock`, huggingface_hub's lock for that blob.
    public func blobLockPath(_ contentID: String) -> String { locksPath + "/" + contentID + ".lock" }

    /// `<hub>/.locks/models--<org>--<name>`: huggingface_hub's blob locks of this repo.
    public var locksPath: String { HubRepoFolder.locksRoot(hub: url.deletingLastPathComponent()) + "/" + url.lastPathComponent }

    /// huggingface_hub's writes in progress, as paths: each blob lock another process holds
    /// (`HubBlobLock.isHeld`; a released lock file stays behind and does not count), and each
    /// `blobs/<etag>.incomplete` (huggingface_hub's staging file, judged live or abandoned by
    /// its age: `incompleteBlobs`).
    public func heldBlobLocks() -> [String] {
        FileTree.names(locksPath).filter { $0.hasSuffix(".lock") }.map { locksPath + "/" + $0 }.filter { HubBlobLock.isHeld($0) }
    }

    /// `blobs/*.incomplete`: the blobs huggingface_hub is writing, or abandoned.
    public func incompleteBlobs() -> [String] {
        FileTree.names(blobsPath).filter { $0.hasSuffix(".incomplete") }.map { blobsPath + "/" + $0 }
    }

    /// What a pointer holds: `../../blobs/<content id>`, one more `../` per folder of the repo path.
    public static func pointerTarget(repoPath: String, contentID: String) -> String {
        let depth = repoPath.utf8.split(separator: UInt8(ascii: "/")).count + 1  // bytes: a combining mark after "/" is no new character
        return String(repeating: "../", count: depth) + "blobs/" + contentID
    }

    /// The commits that have a snapshot folder.
    public func snapshots() -> [String] {
        FileTree.names(snapshotsPath).filter { HubCache.isCommitHash($0) && FileTree.isDirectory(snapshotPath($0)) }
    }

    /// The snapshot folder modified last, nil when there is none.
    public func newestSnapshot() -> String? {
        snapshots().max { (FileTree.facts(snapshotPath($0))?.mtime ?? 0) < (FileTree.facts(snapshotPath($1))?.mtime ?? 0) }
    }

    /// `refs/<name>` and the commit each holds (whitespace trimmed), `main` first.
    public func refs() -> [(name: String, commit: String)] {
        var result: [(name: String, commit: String)] = []
        for name in ["main"] + FileTree.names(path + "/refs").filter({ $0 != "main" }) {
            guard let data = Self.readSmall(refPath(name)) else { continue }
            result.append((name, String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        return result
    }

    /// The commit `revision` names: itself when it is a commit id, else the content of
    /// `refs/<revision>`; nil when neither is known.
    public func commit(forRevision revision: String) -> String? {
        if HubCache.isCommitHash(revision) { return revision }
        guard Revision(revision) != nil,  // never a name that leads out of refs/
              let data = FileManager.default.contents(atPath: refPath(revision)) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return HubCache.isCommitHash(text) ? text : nil
    }

    /// Every entry under `snapshots/<commit>/` that is not a directory, as (repo path, full path,
    /// lstat facts). The walk never follows a link to a directory (a loop, or a way out of the
    /// cache), visits each directory once (by device and inode) and goes at most `maxDepth`
    /// folders deep.
    public func snapshotEntries(_ commit: String, maxDepth: Int = FileTree.deepestWalk) -> [(path: String, fullPath: String, facts: FileFacts)] {
        FileTree.walk(snapshotPath(commit), maxDepth: maxDepth)
    }

    /// The blob a snapshot entry links to, `<repo folder>/blobs/<40 or 64 hex>` (the link
    /// relative or absolute, its folder compared after resolving symlinks); nil for anything else.
    public func blob(ofPointer entryPath: String) -> String? {
        guard FileTree.facts(entryPath)?.isSymlink == true,
              let target = try? FileManager.default.destinationOfSymbolicLink(atPath: entryPath) else { return nil }
        let absolute = target.hasPrefix("/") ? target : (entryPath as NSString).deletingLastPathComponent + "/" + target
        let name = (absolute as NSString).lastPathComponent
        guard ContentHasher.isHex(name, length: 64) || ContentHasher.isHex(name, length: 40) else { return nil }
        let folder = FileTree.canonical((absolute as NSString).deletingLastPathComponent)
        guard folder == FileTree.canonical(blobsPath) else { return nil }
        return folder + "/" + name
    }

    /// The names of the blobs a snapshot's pointers lead to: links to a regular file whose
    /// target's folder is `blobs`, at most `maxDepth` folders deep.
    public func blobNames(_ commit: String, maxDepth: Int) -> Set<String> {
        var blobs = Set<String>()
        for entry in snapshotEntries(commit, maxDepth: maxDepth) where entry.facts.isSymlink {
            var st = stat()
            guard stat(entry.fullPath, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
                  let target = try? FileManager.default.destinationOfSymbolicLink(atPath: entry.fullPath) else { continue }
            let url = URL(fileURLWithPath: target)
            if url.deletingLastPathComponent().lastPathComponent == "blobs" { blobs.insert(url.lastPathComponent) }
        }
        return blobs
    }

    /// The first 4 KiB of a regular file (a ref), read without following a link; nil when
    /// it is not one or cannot be read.
    private static func readSmall(_ path: String) -> Data? {
        guard FileTree.facts(path)?.isRegular == true else { return nil }
        let fd = FileIO.openForLooking(path)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data = Data()
        _ = FileIO.stream(fd) { data.append(contentsOf: $0); return data.count < 4096 }
        return data
    }
}
