// ModelUse - when a model was last used, recorded cheaply for the size cap's eviction
// (`speech cache prune`, `speech-fetchd --max-cache-size`): a load touches a per-model marker only
// when the marker is older than an hour, so a cache on a file server sees at most one metadata
// write per model per hour, never one per load (docs/cache-and-offline.md, "Size cap").
import Foundation
import SharedFiles

extension ModelLayout {
    /// The marker whose mtime records a model's last load (`<model dir>/.speech-fetch-used`).
    public static let useMarker = ".speech-fetch-used"
}

extension ModelDirectory {
    /// Seconds a use record may lag behind the last load: the marker is touched again only when
    /// it is older than this.
    public static let useRecordInterval = 3600.0

    /// `<model dir>/.speech-fetch-used`, or for a huggingface_hub repo folder one marker per
    /// revision, `<repo folder>/.speech-fetch-used-<commit>` (huggingface_hub reads only its
    /// `blobs/`, `snapshots/` and `refs/` folders).
    public var useMarkerPath: String {
        guard let hubCommit else { return path + "/" + ModelLayout.useMarker }
        return path + "/" + ModelLayout.useMarker + "-" + hubCommit
    }

    /// Records a load: one `stat` of the marker, and a touch (or its creation) only when it is
    /// older than `useRecordInterval` or absent. A directory that does not exist, or cannot be
    /// written (a read-only cache), is left as it is. True when it tried to write the record.
    @discardableResult
    public func noteUse(now: Double = Date().timeIntervalSince1970) -> Bool {
        if hubCommit == "" { return false }
        let marker = useMarkerPath
        switch SharedFS.mtime(marker) {
        case .found(let stamp) where now - stamp < Self.useRecordInterval && stamp <= now + 60:
            return false
        case .found:
            SharedFS.touch(marker)
            return true
        case .absent:
            let fd = open(marker, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd >= 0 { close(fd) }
            return true
        case .unknown:
            return false
        }
    }

    /// When the model was last used, on the file server's clock: the newest of its use marker, its
    /// manifest (a download writes it) and, for a huggingface_hub revision, its snapshot folder.
    /// Nil when none of them can be read.
    public func lastUse() -> Double? {
        var stamps = [SharedFS.mtime(useMarkerPath).value]
        if let hubCommit {
            stamps.append(SharedFS.mtime(HubRepoFolder(url).snapshotPath(hubCommit)).value)
        } else {
            stamps.append(SharedFS.mtime(path + "/" + ModelLayout.manifest).value)
            stamps.append(SharedFS.mtime(path).value)
        }
        return stamps.compactMap { $0 }.max()
    }
}

extension ModelDirectory {
    /// A load's look at the cache: the files are checked, and only a load that found them all
    /// (of `revision`, when given) records its use (`noteUse`), so a miss leaves the folder
    /// exactly as it was. When that record was written, the files are checked once more: an
    /// eviction that renamed the model away before the write makes this second look report
    /// them missing, and one that renames it after sees the fresh record and puts it back
    /// (CachePrune's `evict`). A record that needed no write was fresh already, and a fresh
    /// record keeps the model from eviction.
    public func loadCheck(_ selection: FileSelection, repo: String, revision: String? = nil) -> OfflineCheck {
        func look() -> OfflineCheck {
            let check = offlineCheck(selection, repo: repo)
            guard let revision, let other = otherRevision(check, asked: revision) else { return check }
            return OfflineCheck(missing: check.missing.adding(other), present: check.present, commit: check.commit, revision: check.revision)
        }
        let check = look()
        guard check.missing.isEmpty, noteUse() else { return check }
        return look()
    }

    /// Why a native model directory cannot serve `revision` offline, as the item a miss lists;
    /// nil when it can. Its files are of the revision its manifest recorded, at the commit it
    /// recorded: they serve that commit (asked by its full id) or that branch or tag name. A folder
    /// with no manifest (a bundle shipped with an app) serves only the default, `main`. A
    /// huggingface_hub snapshot was chosen by `refs/<revision>` already.
    public func otherRevision(_ check: OfflineCheck, asked revision: String) -> String? {
        guard hubCommit == nil else { return nil }
        guard let commit = check.commit else {
            return revision == "main" ? nil : "revision \(revision) (no manifest there records which revision its files are of)"
        }
        if revision.lowercased() == commit.lowercased() || revision == check.revision { return nil }
        return "revision \(revision) (the files there are of \(check.revision.map { "revision \($0), " } ?? "")commit \(commit.prefix(12)))"
    }
}
