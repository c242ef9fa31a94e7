// SpoolGuard - a supervisor's watch over the spool it serves: deleted or replaced under it, or
// made writable by others, it stops with a message instead of serving nothing in silence
// (docs/protocol.md, "Trust"). It costs an fstat of a held descriptor and an lstat per loop
// where the spool is local (no file server to ask), and one lstat of the root on the safety pass
// where it is shared.
import FileEvents
import Foundation
import ModelCache
import SharedFiles
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

    /// Why the supervisor stops now, or nil. A local spool is looked at on every loop (its held
    /// root's links, then the path: no file server is asked); a shared one on the safety pass
    /// (`safety`) only, by its path.
    func look(safety: Bool) -> SpoolTrustError? {
        if local, fd >= 0 {
            var st = stat()
            if fstat(fd, &st) == 0, st.st_nlink == 0 { return .gone(path: layout.root) }
        }
        guard local || safety, let inode else { return nil }
        return SpoolTrust.lookAtRoot(layout, inode: inode)
    }
}
