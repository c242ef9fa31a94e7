// SpoolGuard - a supervisor's watch over the spool it serves: deleted or replaced under it, or
// made writable by others, it stops with a message instead of serving nothing in silence
// (docs/protocol.md, "Trust"). It costs one fstat of a held descriptor per loop where the spool
// is local (no file server to ask), and one lstat of the spool root on the safety pass.
import FileEvents
import Foundation
import ModelCache
import Spool

final class SpoolGuard: @unchecked Sendable {
    private let layout: SpoolLayout
    private let inode: UInt64?
    private let local: Bool
    private var fd: Int32

    init(spool: Spool) {
        layout = spool.layout
        inode = SpoolTrust.rootInode(spool.layout)
        local = FilesystemKind.inotifySeesAllWriters(spool.root)
        fd = open(spool.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Why the supervisor stops now, or nil. `safety`: the safety pass (the root is looked up by
    /// its path and its modes judged again); otherwise only a local spool's held root is looked at.
    func look(safety: Bool) -> SpoolTrustError? {
        if local, fd >= 0 {
            var st = stat()
            if fstat(fd, &st) == 0, st.st_nlink == 0 { return .gone(path: layout.root) }
        }
        guard safety, let inode else { return nil }
        return SpoolTrust.lookAtRoot(layout, inode: inode)
    }
}
