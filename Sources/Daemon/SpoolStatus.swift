// SpoolStatus - `speech status`: what a cache base's spool holds, as text.
import Foundation
import ModelCache
import Spool
import Transfer

public enum SpoolStatus {
    public static func report(cacheBase: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        let settings = DownloadSettings.fromEnvironment(environment)
        let spool = try Spool(base: cacheBase, node: settings.node, lease: settings.lease)
        var out = "spool \(spool.root)\n"
        let supervisors = spool.liveSupervisors()
        out += "supervisors: \(supervisors.isEmpty ? "none" : supervisors.joined(separator: ", "))\n"
        var workersByNode: [String: Set<String>] = [:]
        let claimed = SpoolFS.list(spool.claimedDir)
        for entry in claimed {
            // Only well-formed claims (`<job>@<node>@<pid>`) name a worker; junk names do not.
            let pieces = entry.split(separator: "@", omittingEmptySubsequences: false)
            guard pieces.count == 3, PlannedFile.parseJob(String(pieces[0])) != nil, !pieces[1].isEmpty,
                  let pid = Int32(pieces[2]), pid > 0 else { continue }
            workersByNode[String(pieces[1]), default: []].insert(String(pid))
        }
        out += "busy workers: " + (workersByNode.isEmpty ? "none" : workersByNode.sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value.count)" }.joined(separator: ", ")) + "\n"
        let requests = spool.requests().sorted { $0.createdAt < $1.createdAt }
        out += "requests: \(requests.count)\n"
        let corrupt = spool.corruptRecords()
        if !corrupt.isEmpty {
            out += "corrupt records: \(corrupt.count) in \(spool.corruptDir) (unreadable, set aside; safe to delete), newest \(corrupt.last!)\n"
        }
        let ready = spool.readyJobs()
        let parts = spool.partsByFile()
        for request in requests {
            let state: String
            switch spool.state(of: request.id) {
            case .active: state = "in flight"
            case .done: state = "done"
            case .failed(let reason): state = "failed: \(reason)"
            }
            out += "  \(request.repo) @ \(request.commit.prefix(10)) → \(request.modelDir) [\(state)]\n"
            let directory = request.directory
            for file in request.files where !directory.isComplete(file) {
                let key = PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)
                let r = ready.filter { $0.hasPrefix(key + ".") }.count
                let c = claimed.filter { $0.hasPrefix(key + ".") }.count
                out += "    \(file.path): \(r) ready, \(c) claimed, \(parts[key]?.count ?? 0) parts waiting\n"
            }
        }
        return out
    }
}
