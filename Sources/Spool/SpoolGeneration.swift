// SpoolGeneration - `spool/generation`, touched by every publisher another node may act on, and
// looked at through a held descriptor (docs/protocol.md, "Change-driven wake-ups").
import Foundation
import SharedFiles

extension Spool {
    /// Tells every node that the spool changed in a way another node may act on: a touch of
    /// `generation` (docs/protocol.md, "Change-driven wake-ups"). Whoever publishes a request, a
    /// plan, ready jobs, a revocation, or a done, failed or failure marker bumps it; a part does
    /// not (the supervisor of the worker that published it sees it through inotify).
    public func bumpGeneration() {
        let path = layout.generation
        if SharedFS.touch(path) { return }
        guard SharedFS.exists(path) == false else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
        _ = SharedFS.touch(path)
    }

    /// What one look at `generation` says: a node compares it with its last look, and does a
    /// full pass only when it moved. Through a descriptor this spool keeps open: an `fstat`, with
    /// no lookup of the path at the file server (what a supervisor does once per poll). Nil when
    /// it cannot be read. `recheckPath` also
    /// looks the path up, so a generation file that was replaced is followed (the safety pass).
    public func heldGenerationLook(recheckPath: Bool = false) -> SpoolGeneration? {
        if recheckPath && lock.withLock({ heldGeneration }).stillNamesHeldFile() == false { bumpGeneration() }
        if let st = lock.withLock({ heldGeneration }).status() { return SpoolGeneration(st) }
        bumpGeneration()  // creates it when it is not there yet
        return lock.withLock { heldGeneration }.status().map(SpoolGeneration.init)
    }
}

/// One look at `spool/generation` (a `stat`): its identity and times. Any publisher's touch
/// changes its ctime and mtime, so two looks that differ mean "something changed; look".
public struct SpoolGeneration: Sendable, Equatable {
    let inode: UInt64
    let mtime: Int64
    let mtimeNanoseconds: Int
    let ctime: Int64
    let ctimeNanoseconds: Int

    init(_ st: stat) {
        inode = UInt64(st.st_ino)
        mtime = Int64(st.st_mtim.tv_sec)
        mtimeNanoseconds = st.st_mtim.tv_nsec
        ctime = Int64(st.st_ctim.tv_sec)
        ctimeNanoseconds = st.st_ctim.tv_nsec
    }
}
