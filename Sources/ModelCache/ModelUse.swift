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
    /// written (a read-only cache), is left as it is.
    public func noteUse(now: Double = Date().timeIntervalSince1970) {
        if hubCommit == "" { return }
        let marker = useMarkerPath
        switch SharedFS.mtime(marker) {
        case .found(let stamp) where now - stamp < Self.useRecordInterval && stamp <= now + 60:
            return
        case .found:
            SharedFS.touch(marker)
        case .absent:
            let fd = open(marker, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd >= 0 { close(fd) }
        case .unknown:
            return
        }
    }

    /// When the model was last used, on the file server's clock: the newest of its use marker, its
    /// manifest (a download writes it) and, for a huggingface_hub revision, its snapshot folder.
    /// Nil when none of them can be read.
    public func lastUse() -> Double? {
        var stamps = [SharedFS.mtime(useMarkerPath).value]
        if let hubCommit {
            stamps.append(SharedFS.mtime(path + "/snapshots/" + hubCommit).value)
        } else {
            stamps.append(SharedFS.mtime(path + "/" + ModelLayout.manifest).value)
            stamps.append(SharedFS.mtime(path).value)
        }
        return stamps.compactMap { $0 }.max()
    }
}

extension ModelDirectory {
    /// A load's look at the cache: the use is recorded first (`noteUse`), then the files are
    /// checked, so an eviction that renames the model away after this look sees the fresh record
    /// and puts it back, and one that renamed it before makes the check report the files missing.
    public func loadCheck(_ selection: FileSelection, repo: String) -> OfflineCheck {
        noteUse()
        return offlineCheck(selection, repo: repo)
    }
}
