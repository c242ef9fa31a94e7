// CacheVerify - `speech cache verify`: re-hash every file against what its manifest recorded at
// download (the sha256 of LFS files, the git blob id of the rest); optionally delete what is
// corrupt and ask the daemon for it again.
import Digest
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool

/// A file whose bytes are not what its manifest says.
public struct CorruptFile: Sendable, Equatable {
    public let repo: String
    public let path: String
    /// `sha256 <hex>` or `<n> bytes`.
    public let expected: String
    public let actual: String
    /// True when `--fix` deleted it.
    public var deleted: Bool

    public init(repo: String, path: String, expected: String, actual: String, deleted: Bool) {
        self.repo = repo
        self.path = path
        self.expected = expected
        self.actual = actual
        self.deleted = deleted
    }
}

/// What `verify` checked and found.
public struct VerifyReport: Sendable {
    /// Repos looked at.
    public var repos: [String] = []
    /// Files whose size was checked, and how many of them were re-hashed.
    public var checkedFiles = 0
    public var hashedFiles = 0
    public var hashedBytes: Int64 = 0
    public var corrupt: [CorruptFile] = []
    /// Files the manifest lists that are not on disk (not corruption: a partial download).
    public var missing = 0
    /// Lines about what was not checked (no manifest, a file in flight).
    public var skipped: [String] = []
    /// Spool requests `--fix` submitted for the deleted files (a daemon serves the base).
    public var requeued: [String] = []
    /// What to run to fetch the deleted files again when no daemon serves the base.
    public var advice: [String] = []

    public var isClean: Bool { corrupt.isEmpty }
}

extension CacheAdmin {
    /// Re-hashes every file of `repo` (or of every model) against the sha256 (LFS) or git blob id
    /// its manifest records, and checks every listed file's size. With `fix`, corrupt files are deleted (under their staging
    /// lock) and, when a `speech-fetchd` serves the base, a spool request asks for them again.
    /// Files a transfer is writing are skipped.
    public func verify(repo: String? = nil, fix: Bool = false) throws -> VerifyReport {
        try CryptoLibrary.load()
        var targets: [(RepoID, ModelDirectory)]
        if let repo {
            let id = try RepoID(repo)
            let directory = directory(for: id)
            guard FileTree.isDirectory(directory.path) else {
                throw CacheAdminError.notCached(repo: id.description, directory: directory.path)
            }
            targets = [(id, directory)]
        } else {
            targets = modelDirectories().map { ($0.repo, $0.directory) }
        }
        let spool = existingSpool()
        let view = SpoolView(spool)
        var report = VerifyReport()
        for (repo, directory) in targets {
            report.repos.append(repo.description)
            guard let manifest = directory.readManifest() else {
                report.skipped.append("\(repo): no manifest (\(ModelLayout.manifest)), nothing recorded to check against")
                continue
            }
            let flight = inFlight(directory, view)
            var found: [RepoFile] = []
            for file in manifest.files {
                if flight.isBusy(file.path) {
                    report.skipped.append("\(repo): \(file.path) is being transferred")
                    continue
                }
                guard let facts = FileTree.facts(directory.finalURL(file.path).path), facts.isRegular else {
                    report.missing += 1
                    continue
                }
                report.checkedFiles += 1
                if facts.size != file.size {
                    report.corrupt.append(CorruptFile(repo: repo.description, path: file.path, expected: "\(file.size) bytes",
                                                      actual: "\(facts.size) bytes", deleted: false))
                    found.append(file)
                    continue
                }
                // LFS files by their sha256, files git stores itself by their blob id.
                let (kind, expected) = file.sha256.map { ("sha256", $0) } ?? ("git blob id", file.blobID.lowercased())
                guard DiskScan.isHex(expected, length: kind == "sha256" ? 64 : 40) else {
                    report.skipped.append("\(repo): \(file.path) has no recorded \(kind) to check against")
                    continue
                }
                let fd = DiskScan.openReadOnly(directory.finalURL(file.path).path)
                guard fd >= 0 else {
                    report.skipped.append("\(repo): \(file.path) cannot be read (\(String(cString: strerror(errno))))")
                    continue
                }
                let digest = file.sha256 != nil ? DiskScan.sha256(fd) : DiskScan.gitBlobID(fd, size: file.size)
                close(fd)
                guard let digest, digest.bytes == file.size else {
                    report.skipped.append("\(repo): \(file.path) could not be read to the end")
                    continue
                }
                report.hashedFiles += 1
                report.hashedBytes += digest.bytes
                if digest.hex != expected {
                    report.corrupt.append(CorruptFile(repo: repo.description, path: file.path, expected: "\(kind) \(expected)",
                                                      actual: "\(kind) \(digest.hex)", deleted: false))
                    found.append(file)
                }
            }
            if fix && !found.isEmpty { repair(found, manifest: manifest, directory: directory, spool: spool, report: &report) }
        }
        return report
    }

    /// Deletes corrupt files under their staging locks, then re-queues them with the daemon or says
    /// how to fetch them again.
    private func repair(_ files: [RepoFile], manifest: RepoSnapshot, directory: ModelDirectory, spool: Spool?,
                        report: inout VerifyReport) {
        var deleted: [RepoFile] = []
        for file in files {
            guard let lock = StagingLock.acquire(file.path, in: directory, owner: owner, lease: lease) else {
                report.skipped.append("\(manifest.repo): \(file.path) was not deleted: a transfer took it over meanwhile")
                continue
            }
            if unlink(directory.finalURL(file.path).path) == 0 || errno == ENOENT {
                deleted.append(file)
                if let i = report.corrupt.firstIndex(where: { $0.repo == manifest.repo && $0.path == file.path }) {
                    report.corrupt[i].deleted = true
                }
            }
            lock.release()
        }
        guard !deleted.isEmpty else { return }
        if let spool, !spool.liveSupervisors().isEmpty {
            let request = SpoolRequest(repo: manifest.repo, revision: manifest.revision, commit: manifest.commit,
                                       modelDir: directory.path, files: deleted, node: node)
            do {
                try spool.submit(request)
                report.requeued.append(request.id)
                return
            } catch {
                report.skipped.append("\(manifest.repo): could not hand the files to speech-fetchd: \(error)")
            }
        }
        let includes = deleted.map { "--include '\($0.path)'" }.joined(separator: " ")
        // Pinned to the recorded commit: the other files on disk are that commit's.
        report.advice.append("speech download \(manifest.repo) --revision \(manifest.commit) \(includes) --cache-base '\(base.path)'")
    }
}
