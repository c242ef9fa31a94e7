// SpoolStatus - `speech status`: what a cache base's spool holds, as text.
import Foundation
import ModelCache
import Spool

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
            let pieces = entry.split(separator: "@")
            if pieces.count == 3 { workersByNode[String(pieces[1]), default: []].insert(String(pieces[2])) }
        }
        out += "busy workers: " + (workersByNode.isEmpty ? "none" : workersByNode.sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value.count)" }.joined(separator: ", ")) + "\n"
        let requests = spool.requests().sorted { $0.createdAt < $1.createdAt }
        out += "requests: \(requests.count)\n"
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
