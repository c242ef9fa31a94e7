// RequestProgress - how far one spool request is: the bytes of its final files, of the ranges its
// sidecars list done or whose parts are published, and of this node's ranges in flight.
import Foundation
import ModelCache
import Spool
import Transfer

enum RequestProgress {
    /// The request's progress now. `parts` is one listing of `parts/` (`Spool.partsByFile`);
    /// `live` this node's in-flight range bytes (`LiveProgress.read`, RAM only). Per file not
    /// yet final it reads the sidecar; a range counts once, whichever source names it.
    static func of(_ request: SpoolRequest, parts: [String: [Int]], live: [String: Int64]) -> TransferProgress {
        let directory = request.directory
        let total = request.files.reduce(Int64(0)) { $0 + $1.size }
        var bytes: Int64 = 0
        var done = 0
        for file in request.files {
            if directory.isComplete(file) {
                bytes += file.size
                done += 1
                continue
            }
            let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
            var counted = Set(parts[key] ?? [])
            var length: (Int) -> Int64 = { $0 == 0 ? file.size : 0 }  // no sidecar: one range
            if case .found(let found) = Sidecar.look(file.path, in: directory), let record = found, record.size == file.size {
                counted.formUnion(record.done)
                length = record.length(ofRange:)
            }
            bytes += counted.reduce(Int64(0)) { $0 + length($1) }
            for (job, held) in live {
                guard let (jobKey, index) = PlannedFile.parseJob(job), jobKey == key, !counted.contains(index) else { continue }
                bytes += min(held, length(index))
            }
        }
        return TransferProgress(completedBytes: min(bytes, total), totalBytes: total, filesDone: done, filesTotal: request.files.count)
    }
}
