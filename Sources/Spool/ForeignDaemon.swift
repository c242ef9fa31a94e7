// ForeignDaemon - a speech-fetchd of another user serving a cache base, as seen by a caller that
// may not use its spool (SpoolTrust: a spool of another user is never used, not even by root,
// who would then write wherever that user's records say). Such a caller must not fetch into the
// base itself either: as root it would leave folders the service cannot write. So it looks, with
// plain lstat and reads that follow no link, whether a daemon of the spool's owner serves it.
import Foundation
import SharedFiles

/// A live speech-fetchd of another user serving a cache base.
public struct ForeignDaemon: Sendable, Equatable {
    /// The spool's owner: the user the daemon runs as.
    public let uid: uid_t
    /// That user's name, or the uid when it has none.
    public let user: String
    /// The node whose supervisor record is fresh, and its pid when it is this node's.
    public let node: String
    public let pid: Int32?

    /// The daemon serving `base` when its spool belongs to another user whose rules keep this
    /// process out (`SpoolTrust.refusal`) and a supervisor record there is alive: this node's by
    /// its pid, another node's by an mtime younger than three leases. Nil otherwise (no spool, a
    /// spool this process may use, or no daemon).
    public static func serving(base: URL, node: String, lease: Double) -> ForeignDaemon? {
        let layout = SpoolLayout(base: base.standardizedFileURL.path)
        var root = stat()
        guard lstat(layout.root, &root) == 0, (root.st_mode & S_IFMT) == S_IFDIR, root.st_uid != geteuid(),
              SpoolTrust.refusal(layout.root) != nil else { return nil }
        let folder = layout.path(.supervisors)
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { !$0.hasPrefix(".") }
        for name in names.sorted(by: { a, _ in a == node }) {
            var record = stat()
            let path = folder + "/" + name
            guard lstat(path, &record) == 0, (record.st_mode & S_IFMT) == S_IFREG else { continue }
            if name == node {
                guard let pid = readPid(path), LeaseJudge.processRunning(pid) else { continue }
                return ForeignDaemon(uid: root.st_uid, user: SpoolTrust.accountName(root.st_uid), node: name, pid: pid)
            }
            let age = Date().timeIntervalSince1970 - Double(record.st_mtim.tv_sec)
            if age < 3 * lease {
                return ForeignDaemon(uid: root.st_uid, user: SpoolTrust.accountName(root.st_uid), node: name, pid: nil)
            }
        }
        return nil
    }

    /// A supervisor record's pid: a few bytes of a regular file, read without following a link.
    private static func readPid(_ path: String) -> Int32? {
        let fd = FileIO.openForLooking(path)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = read(fd, &bytes, bytes.count)
        guard n > 0 else { return nil }
        return Int32(String(decoding: bytes.prefix(n), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
