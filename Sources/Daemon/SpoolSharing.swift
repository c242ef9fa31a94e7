// SpoolSharing - whether inotify sees every writer of a spool, decided once per process when the
// spool is opened, and the poll intervals of the supervisor, the workers and the waiters that
// follow from it (docs/protocol.md, "Change-driven wake-ups").
import Foundation
import SharedFiles
import Spool
import Transfer

struct SpoolSharing: Sendable {
    /// True where inotify sees every writer (a local filesystem): the polls are a safety net.
    /// False where other nodes write unseen (NFS, FUSE): the polls are how their writes are seen.
    let seesAllWriters: Bool
    /// The cluster poll interval in seconds (`DownloadSettings.pollInterval`).
    let pollInterval: Double

    /// An idle worker slot's longest sleep between looks at the ready jobs, in seconds.
    var workerPoll: Int { seesAllWriters ? 2 : max(1, Int(pollInterval.rounded())) }

    /// The supervisor's wait between looks at the spool's generation, in seconds.
    var supervisorPoll: Double { seesAllWriters ? 1.0 : max(0.2, pollInterval) }

    /// A waiter's full pass (orphans, supervisor liveness), in seconds: every 2 s where inotify
    /// sees every writer; the poll interval where other nodes write unseen, or where the waiter
    /// has no inotify instance (`watching` false) and sleeps on the wake word (at least 2 s there).
    func waiterPoll(watching: Bool) -> Int {
        let interval = Int(pollInterval.rounded())
        return seesAllWriters ? (watching ? 2 : max(2, interval)) : max(1, interval)
    }

    /// How often a waiter asleep in its watcher looks for another node's done/failed marker
    /// (`SettledLook`); nil where inotify reports it, or where the waiter has no watcher.
    func settledLookInterval(watching: Bool) -> Double? {
        watching && !seesAllWriters ? max(0.05, pollInterval / 4) : nil
    }
}

extension Spool {
    /// Seconds a client of a filesystem that caches names and attributes (NFS with
    /// `actimeo=1`, GlusterFS's and bindfs's FUSE mounts with a 1 s entry and attribute timeout)
    /// may still serve a renamed-over file's old content, with a margin (docs/cluster.md).
    static let networkSettle = 2.0

    /// The spool of a cache base as a node's daemon and its callers use it: on a filesystem where
    /// inotify cannot see other clients' writes (their caches can be stale too), a splicer writes
    /// a sidecar only `networkSettle` seconds after it took the file's lock (`Spool.settle`).
    /// Its `SpoolSharing` is the one look at the spool's filesystem kind.
    static func served(base: URL, settings: DownloadSettings) throws -> (spool: Spool, sharing: SpoolSharing) {
        var sharing = SpoolSharing(seesAllWriters: true, pollInterval: settings.pollInterval)
        // statfs looks at the spool's root once the spool has made it.
        let spool = try Spool(base: base, node: settings.node, lease: settings.lease, settleOnceMade: { root in
            sharing = SpoolSharing(seesAllWriters: FilesystemKind.inotifySeesAllWriters(root), pollInterval: settings.pollInterval)
            return sharing.seesAllWriters ? 0 : networkSettle
        })
        return (spool, sharing)
    }
}
