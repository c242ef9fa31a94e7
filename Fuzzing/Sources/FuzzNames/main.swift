// FuzzNames - the names the spool and the staging folder are read by: range jobs and parts
// (`<key>.<index>`), claim and lock holders (`<node>@<pid>`), staging names (`a%2Fb`) and the
// staging entries grouped by `speech cache ls/clean`.
import FuzzSupport
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool

let suffixes = [".lock", ".sidecar.json", ".lock.broken.1700000000", ".import.4242"]

fuzzMain { data in
    let name = text(data)
    if let job = PlannedFile.parseJob(name) {
        // A job name that parses names exactly one job: it is the name that job is written as.
        expect(PlannedFile.jobName(key: job.key, index: job.index) == name, "job name '\(name)' does not re-encode to itself")
    }
    if let owner = LockOwner(tag: name) {
        expect(LockOwner(tag: owner.description) == owner, "holder '\(name)' does not re-encode stably")
    }
    // Staging names are bounded (a deep path's ends in its hash) and reversible below the
    // bound, and every entry of a staged file groups under its name.
    let staged = ModelLayout.stagingName(name)
    expect(!staged.utf8.contains(UInt8(ascii: "/")), "staging name '\(staged)' has a slash byte")
    expect(staged.utf8.count <= ModelLayout.maxStagingName, "staging name '\(staged)' is longer than \(ModelLayout.maxStagingName) bytes")
    expect(ModelLayout.stagingName(name) == staged, "staging name of '\(name)' is not deterministic")
    if !ModelLayout.isHashed(staged) {
        expect(ModelLayout.repoPath(stagingName: staged) == name, "staging name '\(staged)' does not decode to '\(name)'")
    }
    _ = ModelLayout.repoPath(stagingName: name)
    if (try? RepoPath.validate(name, in: RepoID("org/name"))) != nil {
        expect(ModelLayout.owner(ofEntry: staged) == staged, "staged file '\(staged)' groups under another name")
        for suffix in suffixes {
            let entry = staged + suffix
            expect(ModelLayout.owner(ofEntry: entry) == staged, "entry '\(entry)' groups under another name")
        }
        let temp = ".\(staged).sidecar.json.tmp.42"
        expect(ModelLayout.owner(ofEntry: temp) == staged, "entry '\(temp)' groups under another name")
    }
}
