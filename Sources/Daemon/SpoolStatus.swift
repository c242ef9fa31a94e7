// SpoolStatus - `speech status`: what a cache base's spool holds, as values the command prints.
import Foundation
import ModelCache
import Spool
import Transfer

/// A cache base's spool at one instant.
public struct SpoolStatus: Sendable {
    public struct Request: Sendable {
        public let id: String
        public let repo: String
        public let commit: String
        public let modelDir: String
        /// "in flight", "done", or "failed: <reason>".
        public let state: String
        public let files: [FileJobs]
        /// Bytes of final files, of ranges done or published, and of this node's ranges in
        /// flight (RequestProgress); ranges other nodes have in flight count once published.
        public let completedBytes: Int64
        public let totalBytes: Int64
    }

    /// Jobs of one file that is not final yet.
    public struct FileJobs: Sendable {
        public let path: String
        public let ready: Int
        public let claimed: Int
        public let partsWaiting: Int
    }

    public let spool: String
    /// Nodes whose supervisor is alive.
    public let supervisors: [String]
    /// Busy worker processes per node.
    public let busyWorkers: [String: Int]
    public let requests: [Request]
    /// Unreadable records set aside in `corruptDir` (docs/protocol.md), oldest first.
    public let corruptRecords: [String]
    public let corruptDir: String

    /// Reads the spool of `cacheBase` (creating it when missing).
    public static func read(cacheBase: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SpoolStatus {
        let settings = DownloadSettings.fromEnvironment(environment)
        let spool = try Spool(base: cacheBase, node: settings.node, lease: settings.lease)
        var workersByNode: [String: Set<Int32>] = [:]
        // Only well-formed claims name a worker; junk names do not.
        let claims = (spool.claims() ?? []).filter(\.isWorkers)
        for claim in claims { workersByNode[claim.holder.node, default: []].insert(claim.holder.pid) }
        let ready = spool.readyJobs()
        let parts = spool.partsByFile()
        let live = LiveProgress(spool: spool)?.read() ?? [:]
        let requests = spool.requests().sorted { $0.createdAt < $1.createdAt }.map { request -> Request in
            let state: String
            switch spool.state(of: request.id) {
            case .active: state = "in flight"
            case .done: state = "done"
            case .failed(let failure): state = "failed: \(failure.reason)"
            }
            let directory = request.directory
            let files = request.files.filter { !directory.isComplete($0) }.map { file -> FileJobs in
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                return FileJobs(path: file.path, ready: ready.filter { $0.hasPrefix(key + ".") }.count,
                                claimed: claims.filter { $0.range?.key == key }.count, partsWaiting: parts[key]?.count ?? 0)
            }
            let progress = RequestProgress.of(request, parts: parts, live: live)
            return Request(id: request.id, repo: request.repo, commit: request.commit, modelDir: request.modelDir, state: state,
                           files: files, completedBytes: progress.completedBytes, totalBytes: progress.totalBytes)
        }
        return SpoolStatus(spool: spool.root, supervisors: spool.liveSupervisors(), busyWorkers: workersByNode.mapValues(\.count),
                           requests: requests, corruptRecords: spool.corruptRecords(), corruptDir: spool.layout.path(.corrupt))
    }
}
