// FuzzSpoolRecords - the spool's JSON records as a worker reads them from a shared filesystem:
// requests (`requests/<id>.json`), plans (`plans/<key>.json`) and failure markers.
import FuzzSupport
import Foundation
import HubTypes
import Spool

if let seeds = ProcessInfo.processInfo.environment["FUZZ_WRITE_SEEDS"] {
    // Records as the spool writes them (JSONEncoder, as Spool.submit and Spool.plan do).
    let files = [RepoFile(path: "config.json", size: 1234, blobID: "5d2c2f3f4a8bd7b8d2e7e4c0e8f1a9b6c3d2e1f0", sha256: nil),
                 RepoFile(path: "text/model-00001-of-00002.safetensors", size: 40 << 20,
                          blobID: "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
                          sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")]
    let commit = "0123456789abcdef0123456789abcdef01234567"
    let request = SpoolRequest(repo: "org/name", revision: "main", commit: commit, modelDir: "/cache/models/org/name",
                               files: files, node: "node-1")
    try! JSONEncoder().encode(request).write(to: URL(fileURLWithPath: "\(seeds)/request.json"))
    for (i, file) in files.enumerated() {
        let plan = PlannedFile(repo: "org/name", modelDir: "/cache/models/org/name", commit: commit, file: file,
                               rangeSize: 16 << 20, node: "node-1")
        try! JSONEncoder().encode(plan).write(to: URL(fileURLWithPath: "\(seeds)/plan-\(i).json"))
    }
    try! JSONSerialization.data(withJSONObject: ["reason": "404 EntryNotFound: text/model.safetensors"])
        .write(to: URL(fileURLWithPath: "\(seeds)/failure.json"))
    exit(0)
}

fuzzMain { data in
    if let request = try? JSONDecoder().decode(SpoolRequest.self, from: data) {
        let again = try? JSONDecoder().decode(SpoolRequest.self, from: JSONEncoder().encode(request))
        expect(again == request, "a request changes through encode and decode")
    }
    if let plan = try? JSONDecoder().decode(PlannedFile.self, from: data) {
        let again = try? JSONDecoder().decode(PlannedFile.self, from: JSONEncoder().encode(plan))
        expect(again == plan, "a plan changes through encode and decode")
        if plan.isConsistent {
            // A plan the spool accepts splits its file into ranges that tile it exactly.
            for index in Set([0, plan.rangeCount / 2, plan.rangeCount - 1]) {
                let r = plan.range(index)
                expect(r.start >= 0 && r.start <= r.end && r.end < plan.file.size,
                       "range \(index) of a plan is \(r.start)-\(r.end) for \(plan.file.size) bytes")
                let name = plan.jobName(index)
                let parsed = PlannedFile.parseJob(name)
                expect(parsed?.key == plan.key && parsed?.index == index, "job name '\(name)' does not parse back")
            }
            expect(plan.range(plan.rangeCount - 1).end == plan.file.size - 1, "the last range does not end the file")
        }
    }
    if let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let reason = object["reason"] as? String {
        _ = reason
    }
}
