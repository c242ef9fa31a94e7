// FilesystemKind - statfs: where inotify cannot see other machines' writes, and where a copy
// through memory beats copying in the kernel.
import CFileOps
import Foundation

/// Which filesystems report other machines' writes through inotify, and which are local disks.
public enum FilesystemKind {
    /// False for network and FUSE filesystems (NFS, SMB/CIFS, FUSE, Ceph, Lustre, GPFS, 9p…),
    /// where inotify sees only this machine's writes and a bounded poll is needed.
    public static func inotifySeesAllWriters(_ path: String) -> Bool {
        var st = statfs()
        guard statfs(path, &st) == 0 else { return false }
        return !isRemote(st)
    }

    /// True when the open file lives on a network or FUSE filesystem (or its kind cannot be read):
    /// there a copy through this process's memory beats copying in the kernel and reading back.
    public static func isRemote(fileDescriptor fd: Int32) -> Bool {
        var st = statfs()
        guard fstatfs(fd, &st) == 0 else { return true }
        return isRemote(st)
    }

    private static func isRemote(_ st: statfs) -> Bool {
        let remote: Set<Int> = [0x6969, 0x65735546, 0xFF534D42, 0xFE534D42, 0x517B, 0x00C36400, 0x0BD00BD0,
                                0x47504653, 0x01021997, 0x013111A8, 0x73757245]
        return remote.contains(Int(UInt32(truncatingIfNeeded: Int(st.f_type))))
    }
}
