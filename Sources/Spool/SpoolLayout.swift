// SpoolLayout - every name in the spool and the parsers that read them back (docs/protocol.md,
// "The spool"). The layers above act through `Spool`'s operations; they take a folder from here
// only to watch it or to name it in a message, and tests read the format through it.
import Foundation
import ModelCache
import SharedFiles

/// The spool's folders, the names of its files, and their parsers.
public struct SpoolLayout: Sendable {
    /// The spool's folders, by their path under the spool.
    public enum Folder: String, CaseIterable, Sendable {
        case tmp
        case requests
        case done
        case failed
        case plans
        case ready = "jobs/ready"
        case claimed = "jobs/claimed"
        case endgame = "jobs/endgame"
        case parts
        case failures
        case supervisors
        /// Records that were read whole but do not parse (Postfix's `corrupt`).
        case corrupt
    }

    /// `<base>/spool`.
    public let root: String

    public init(root: String) { self.root = root }

    /// The spool of a cache base.
    public init(base: String) { root = base + "/spool" }

    public func path(_ folder: Folder) -> String { root + "/" + folder.rawValue }

    /// `<folder>/<name>`.
    public func path(_ folder: Folder, _ name: String) -> String { root + "/" + folder.rawValue + "/" + name }

    // MARK: Names

    /// `requests/<id>.json`.
    public func request(_ id: String) -> String { path(.requests, id + ".json") }
    /// `done/<id>`: the request's files are final.
    public func doneMarker(_ id: String) -> String { path(.done, id) }
    /// `failed/<id>.json`: `{"reason": …}`.
    public func failedMarker(_ id: String) -> String { path(.failed, id + ".json") }
    /// `plans/<key>.json`.
    public func plan(_ key: String) -> String { path(.plans, key + ".json") }
    /// `jobs/ready/<job>`.
    public func ready(_ job: String) -> String { path(.ready, job) }
    /// `jobs/claimed/<job>@<node>@<pid>`.
    public func claim(_ job: String, by owner: LockOwner) -> String { path(.claimed, "\(job)@\(owner)") }
    /// `jobs/endgame/<job>`: the one duplicate racing a lagging claim.
    public func endgameMarker(_ job: String) -> String { path(.endgame, job) }
    /// `parts/<job>.part`.
    public func part(_ job: String) -> String { path(.parts, job + ".part") }
    /// `failures/<key>.json`: a file's unrecoverable failure.
    public func failure(_ key: String) -> String { path(.failures, key + ".json") }
    /// `supervisors/<node>`: the pid of the node's supervisor; its mtime is the heartbeat.
    public func supervisor(_ node: String) -> String { path(.supervisors, node) }
    /// `fetchd-<node>.lock`: the pid of the one supervisor of the node, taken with link(2). Beside
    /// the folders, not in `supervisors/`: callers waiting on a daemon watch that folder, and must
    /// not wake to a new lock while the record still names the daemon that died.
    public func supervisorLock(_ node: String) -> String { root + "/fetchd-\(node).lock" }
    /// `tmp/<hint>@<node>@<pid>@<n>`: unique across nodes.
    public func temp(_ hint: String, owner: LockOwner, n: Int) -> String { path(.tmp, "\(hint)@\(owner.node)@\(owner.pid)@\(n)") }
    /// The hint of a worker's unfinished part of `job` (`tmp/part-<job>@<node>@<pid>@<n>`); with
    /// `tag`, the progress record of a range written in place into the staging file of that tag
    /// (`tmp/part-<job>~<tag>@…`).
    public static func partTempHint(_ job: String, tag: String? = nil) -> String { "part-" + job + (tag.map { "~" + $0 } ?? "") }
    /// `corrupt/<folder>.<name>.<node>.<pid>.<n>`: a record set aside from `<folder>/<name>`.
    public func corrupt(_ recordPath: String, owner: LockOwner, n: Int) -> String {
        let name = (recordPath as NSString).lastPathComponent
        let folder = ((recordPath as NSString).deletingLastPathComponent as NSString).lastPathComponent
        return path(.corrupt, "\(folder).\(name).\(owner.node).\(owner.pid).\(n)")
    }
    /// `fetchd-<node>.log`: stdout and stderr of a speech-fetchd that `--detach` started.
    public func daemonLog(_ node: String) -> String { root + "/fetchd-\(node).log" }
    /// `clock`: touched to read the file server's "now".
    public var clockProbe: String { root + "/clock" }
    /// `generation`: touched by every publisher another node may act on; one `stat` of it tells a
    /// node whether anything changed since its last look (`Spool.bumpGeneration`).
    public var generation: String { root + "/generation" }
    /// `wake`: one page whose first 32-bit word is the wake word (`WakeWord`).
    public var wakeWord: String { root + "/wake" }

    // MARK: Parsers

    /// The id of a `requests/` entry (`<id>.json`), the key of a `plans/` or `failures/` one.
    public static func recordID(_ entry: String) -> String? { entry.hasSuffix(".json") ? String(entry.dropLast(5)) : nil }

    /// The job of a `parts/` entry (`<job>.part`).
    public static func partJob(_ entry: String) -> String? { entry.hasSuffix(".part") ? String(entry.dropLast(5)) : nil }

    /// The job of a claim, `<job>@…` (nil for a name without `@`): what "is this job claimed"
    /// compares, so that a claim with a junk holder still keeps its job from being made ready again.
    public static func claimedJob(_ entry: String) -> String? { entry.firstIndex(of: "@").map { String(entry[..<$0]) } }

    /// A claim's name read back: `<job>@<node>@<pid>`, exactly three fields and a pid.
    public struct Claim: Sendable, Equatable {
        /// The entry's name in `jobs/claimed/`.
        public let name: String
        public let job: String
        public let holder: LockOwner

        public init?(_ entry: String) {
            let pieces = entry.split(separator: "@", omittingEmptySubsequences: false)
            guard pieces.count == 3, let pid = Int32(pieces[2]) else { return nil }
            name = entry
            job = String(pieces[0])
            holder = LockOwner(node: String(pieces[1]), pid: pid)
        }

        /// The job's file key and range index, when the job is one the spool writes.
        public var range: (key: String, index: Int)? { PlannedFile.parseJob(job) }

        /// A claim a worker made: a job name that parses, a node and a pid.
        public var isWorkers: Bool { range != nil && !holder.node.isEmpty && holder.pid > 0 }
    }

    /// A temp file's name read back: `<hint>@<node>@<pid>@<n>`.
    struct Temp {
        let hint: String
        let node: String
        let pid: Int32

        init?(_ name: String) {
            let pieces = name.split(separator: "@")
            guard pieces.count == 4, let pid = Int32(pieces[2]) else { return nil }
            hint = String(pieces[0])
            node = String(pieces[1])
            self.pid = pid
        }

        /// The job whose unfinished part this is (`part-<job>`, or `part-<job>~<tag>`), if it is one.
        var partJob: String? {
            guard hint.hasPrefix("part-") else { return nil }
            return String(hint.dropFirst(5).prefix { $0 != "~" })
        }

        /// The staging file's tag of a range written in place (`part-<job>~<tag>`): the part
        /// holds no bytes, its length is the prefix written into that staging file.
        var stagingTag: String? {
            guard hint.hasPrefix("part-"), let mark = hint.firstIndex(of: "~") else { return nil }
            return String(hint[hint.index(after: mark)...])
        }
    }
}
