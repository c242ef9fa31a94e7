// NodeNamesView - the last listing of `supervisors/` (the nodes that serve the spool), shared in
// RAM by the worker processes of this machine, so that the nodes' count behind each fair share
// costs the file server one listing per node and interval, not one per worker process.
//
// One file beside LiveProgress's records on /dev/shm: `.nodes`, the names one process listed and
// when (CLOCK_MONOTONIC, one clock for the machine's processes). A listing younger than the age
// the caller allows is used; an older one is listed again by one process at a time (`.nodes-lister`,
// flock): the others, needing it at the same moment, use its listing. Nothing here is on the
// shared filesystem, and a wrong or missing record only costs a listing.
import Foundation
import SharedFiles

public struct NodeNamesView: Sendable {
    let recordPath: String
    let listerPath: String
    let live: LiveProgress

    /// The view of `spool`'s node names on this machine, or nil without a writable /dev/shm.
    public init?(spool: Spool) {
        guard let live = LiveProgress(spool: spool) else { return nil }
        self.live = live
        recordPath = MachineFiles.path("nodes", beside: live)
        listerPath = MachineFiles.path("nodes-lister", beside: live)
    }

    /// The names listed at most `maxAge` seconds ago by any process of this machine, else
    /// `list()`'s, which this process then shares. nil from `list()` (a listing that failed) is
    /// passed on and not shared.
    public func names(maxAge: Double, list: () -> [String]?) -> [String]? {
        if let names = fresh(maxAge: maxAge) { return names }
        guard live.prepare() else { return list() }
        return MachineFiles.oneAtATime(listerPath) {
            if let names = fresh(maxAge: maxAge) { return names }  // listed by the lock's last holder
            guard let names = list() else { return nil }
            MachineFiles.replace(recordPath, with: "\(MonotonicClock.nanoseconds())\n" + names.map { $0 + "\n" }.joined())
            return names
        }
    }

    /// Removes the files (a daemon that drains).
    public func remove() {
        unlink(recordPath)
        unlink(listerPath)
    }

    private func fresh(maxAge: Double) -> [String]? {
        guard let data = FileManager.default.contents(atPath: recordPath),
              let text = String(data: data, encoding: .utf8) else { return nil }
        var lines = text.split(separator: "\n").map(String.init)
        guard let header = lines.first, let listedAt = UInt64(header) else { return nil }
        let age = Double(MonotonicClock.nanoseconds() &- listedAt) / 1e9
        guard age >= 0, age < maxAge else { return nil }
        lines.removeFirst()
        return lines
    }
}
