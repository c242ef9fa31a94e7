// StagedTransfers - downloads running without the daemon (the embedded engine of a `speech
// download` or a Swift caller), found by their live staging locks under `.incomplete/`.
import Foundation
import ModelCache
import Spool

/// One file a process is writing under its staging lock, outside any spool request.
public struct StagedTransfer: Sendable {
    public let repo: String
    public let modelDir: String
    public let path: String
    /// The lock's holder, `node@pid`.
    public let holder: String
    /// Bytes staged so far: the sidecar's done ranges and the recorded prefixes of the others
    /// (the engine records them every 0.25 s or 4 MiB); for a file without a sidecar (one
    /// range), the staging file's allocated bytes.
    public let bytes: Int64
    public let size: Int64
}

extension CacheAdmin {
    /// Every file of the cache base's models being written under a live staging lock that no
    /// active spool request asks for (those are the daemon's: `speech status` shows them as
    /// requests). One listing of each model's `.incomplete/`, a read of the lock and sidecar of
    /// each locked file.
    public func stagedTransfers() -> [StagedTransfer] {
        let view = SpoolView(existingSpool())
        var result: [StagedTransfer] = []
        for (repo, directory) in modelDirectories() {
            let flight = inFlight(directory, view)
            for (path, holder) in flight.lockedPaths.sorted(by: { $0.key < $1.key }) where !flight.requestedPaths.contains(path) {
                var bytes: Int64 = 0
                var size: Int64 = 0
                if case .found(let found) = Sidecar.look(path, in: directory), let record = found {
                    size = record.size
                    bytes = record.stagedBytes
                } else {
                    var info = stat()
                    guard lstat(directory.stagingPath(ModelLayout.stagingName(path)), &info) == 0 else { continue }
                    size = Int64(info.st_size)
                    bytes = min(size, Int64(info.st_blocks) * 512)
                }
                result.append(StagedTransfer(repo: repo.description, modelDir: directory.path, path: path, holder: holder,
                                             bytes: min(bytes, size), size: size))
            }
        }
        return result
    }
}
