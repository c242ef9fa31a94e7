// RequestProgress - how far one spool request is: the bytes of its final files, of the ranges its
// sidecars list done or whose parts are published (what the shared filesystem says), and of this
// node's ranges in flight (what this machine's RAM says).
import Foundation
import HubTypes
import Synchronization
import ModelCache
import Spool
import Transfer

/// A request's progress in two layers: `RequestProgress.Shared`, read from the shared filesystem
/// (final files, sidecars, a listing of `parts/`), which a waiter reads only now and then, and this
/// node's in-flight range bytes (`LiveProgress`, RAM), laid over it at every tick.
enum RequestProgress {
    /// What the shared filesystem said of each file at one look.
    struct Shared: Sendable {
        struct File: Sendable {
            let key: String
            let size: Int64
            let complete: Bool
            /// Ranges the sidecar lists done or whose parts are published.
            let counted: Set<Int>
            /// The sidecar's range size; 0 without a sidecar (the file is then one range).
            let rangeSize: Int64

            func length(ofRange index: Int) -> Int64 {
                guard rangeSize > 0 else { return index == 0 ? size : 0 }
                return max(0, min(size, Int64(index + 1) * rangeSize) - Int64(index) * rangeSize)
            }
        }
        let files: [File]
        let total: Int64
    }

    /// The request's progress now. `parts` is one listing of `parts/` (`Spool.partsByFile`);
    /// `live` this node's in-flight range bytes (`LiveProgress.read`, RAM only). Per file not
    /// yet final it reads the sidecar; a range counts once, whichever source names it.
    static func of(_ request: SpoolRequest, parts: [String: [Int]], live: [String: Int64]) -> TransferProgress {
        with(shared(request, parts: parts), live: live)
    }

    /// The shared layer: a look at each file (final?) and at the sidecar of each file not final.
    /// A file seen final stays final for this process's progress (a waiter of ten thousand small
    /// files looked at each final one again, a stat, an xattr read, at every tick): what a
    /// process saw final, per request. Progress only: done is judged from the markers.
    private static let seenFinal = Mutex<[String: Set<String>]>([:])

    /// Each request's file keys (a SHA-256 each), made once per request and process: a waiter of
    /// ten thousand small files hashed every key again at every tick.
    /// Kept with the files they were made for, in their order (two records of one id list the
    /// same files, not always in the same order).
    private static let fileKeys = Mutex<[String: (files: [RepoFile], keys: [String])]>([:])

    private static func keys(of request: SpoolRequest) -> [String] {
        if let known = fileKeys.withLock({ $0[request.id] }), known.files == request.files { return known.keys }
        let made = request.files.map { PlannedFile.key(modelDir: request.modelDir, path: $0.path, commit: request.commit) }
        fileKeys.withLock {
            if $0.count >= 64 && $0[request.id] == nil { $0.removeAll() }  // a long-lived process sees many requests
            $0[request.id] = (request.files, made)
        }
        return made
    }

    static func shared(_ request: SpoolRequest, parts: [String: [Int]]) -> Shared {
        let directory = request.directory
        var files: [Shared.File] = []
        let known = seenFinal.withLock { $0[request.id] ?? [] }
        var final = known
        for (file, key) in zip(request.files, keys(of: request)) {
            if final.contains(key) || directory.isComplete(file) {
                final.insert(key)
                files.append(Shared.File(key: key, size: file.size, complete: true, counted: [], rangeSize: 0))
                continue
            }
            var counted = Set(parts[key] ?? [])
            var rangeSize: Int64 = 0
            // A file of at most one page (the smallest range) is one range, which has no sidecar
            // before it is final: no look (an open per small file at every tick of a large repo).
            if file.size > DownloadSettings.pageSize, case .found(let found) = Sidecar.look(file.path, in: directory),
               let record = found, record.size == file.size {
                counted.formUnion(record.done)
                rangeSize = max(1, record.rangeSize)
            }
            files.append(Shared.File(key: key, size: file.size, complete: false, counted: counted, rangeSize: rangeSize))
        }
        if final.count > known.count {
            seenFinal.withLock {
                if $0.count >= 64 && $0[request.id] == nil { $0.removeAll() }  // a long-lived process sees many requests
                $0[request.id] = final
            }
        }
        return Shared(files: files, total: request.files.reduce(Int64(0)) { $0 + $1.size })
    }

    /// The shared layer with this node's ranges in flight laid over it.
    static func with(_ shared: Shared, live: [String: Int64]) -> TransferProgress {
        var bytes: Int64 = 0
        var done = 0
        // The ranges in flight by file, parsed once (not once per file of the request at each tick).
        var flying: [String: [(index: Int, held: Int64)]] = [:]
        for (job, held) in live {
            guard let (key, index) = PlannedFile.parseJob(job) else { continue }
            flying[key, default: []].append((index, held))
        }
        for file in shared.files {
            if file.complete {
                bytes += file.size
                done += 1
                continue
            }
            bytes += file.counted.reduce(Int64(0)) { $0 + file.length(ofRange: $1) }
            for range in flying[file.key] ?? [] where !file.counted.contains(range.index) {
                bytes += min(range.held, file.length(ofRange: range.index))
            }
        }
        return TransferProgress(completedBytes: min(bytes, shared.total), totalBytes: shared.total, filesDone: done,
                                filesTotal: shared.files.count)
    }
}
