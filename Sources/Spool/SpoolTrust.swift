// SpoolTrust - who may write a spool (docs/protocol.md, "Trust"). A daemon writes the Hub's bytes
// wherever a request or plan names: a spool that another user can write would let that user
// choose where, so a spool is used only when no one else can write it. Where a record may point
// is RequestTargets'.
import Foundation
import SharedFiles

/// Why a spool is not used.
public enum SpoolTrustError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A folder of the spool that another user could write, or that is not a plain directory.
    case untrusted(path: String, reason: String)
    /// The spool was removed (or replaced) under a running daemon.
    case gone(path: String)

    public var description: String {
        switch self {
        case .untrusted(let path, let reason):
            return "the spool folder \(path) \(reason); another user could plant requests there and choose where the daemon "
                + "writes, so it is not used. Make it yours and private (chown $(id -u) \(path); chmod 0700 \(path)), "
                + "or 0770 with a group only the cache's users are in (chgrp GROUP; chmod 0770), or delete the spool folder "
                + "(its records are rebuilt from requests asked again)"
        case .gone(let path):
            return "the spool \(path) was deleted or replaced under this speech-fetchd; it stops (the callers waiting on it "
                + "see no daemon and finish their transfers themselves); start it again to serve a new spool"
        }
    }
}

public enum SpoolTrust {
    /// The mode of a spool folder this process creates: 0700, or 0770 under a spool root that is
    /// group-writable for a group this process is in (a shared cache's dedicated group).
    static func folderMode(root: String) -> mode_t {
        var st = stat()
        guard lstat(root, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_mode & S_IWGRP != 0,
              isMember(of: st.st_gid) else { return 0o700 }
        return 0o770
    }

    /// Creates the spool's folders (0700, or 0770 under a group-shared root) and checks that no
    /// other user can write any of them.
    public static func prepare(_ layout: SpoolLayout) throws {
        try SpoolError.saying { try FileIO.makeDirectory(layout.root, mode: 0o700) }
        let mode = folderMode(root: layout.root)
        for path in [layout.root + "/jobs"] + SpoolLayout.Folder.allCases.map({ layout.path($0) }) {
            if mkdir(path, mode) == 0 {
                chmod(path, mode)  // the umask may have taken the group's bits
            } else if errno != EEXIST {
                throw SpoolError.io(path: path, operation: "create directory", errno: errno)
            }
        }
        try check(layout)
    }

    /// Checks the spool root and every folder (`SpoolLayout.Folder`, and `jobs`): each one a real
    /// directory (no symlink), owned by this process's user or root, not writable by others
    /// (the sticky bit does not help: it keeps others from removing our records, not from adding
    /// theirs), and group-writable only for a group this process is in. A folder that cannot be
    /// looked at now (a stale handle) is not judged.
    public static func check(_ layout: SpoolLayout) throws {
        var paths = [layout.root, layout.root + "/jobs"]
        paths += SpoolLayout.Folder.allCases.map { layout.path($0) }
        for path in paths {
            if let reason = refusal(path) { throw SpoolTrustError.untrusted(path: path, reason: reason) }
        }
    }

    /// Why no spool may be kept in the folder at `path`; nil when it may.
    public static func refusal(_ path: String) -> String? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: break
        case S_IFLNK: return "is a symbolic link (to \((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?"))"
        default: return "is not a directory"
        }
        let me = geteuid()
        if st.st_uid != me && st.st_uid != 0 {
            return "belongs to user \(userName(st.st_uid)), not to \(userName(me)) (who runs this process) or root"
        }
        if st.st_mode & S_IWOTH != 0 {
            return String(format: "is writable by every user (mode %04o%@)", st.st_mode & 0o7777,
                          st.st_mode & S_ISVTX != 0 ? "; the sticky bit does not stop others from adding records" : "")
        }
        if st.st_mode & S_IWGRP != 0 && !isMember(of: st.st_gid) {
            return String(format: "is writable by the group %@ (mode %04o), which %@ is not in", groupName(st.st_gid),
                          st.st_mode & 0o7777, userName(me))
        }
        return nil
    }

    /// One look at the spool root on a safety pass: nil while it is the directory this process
    /// opened (`inode`) and no other user can write it; else why the daemon stops. A root that
    /// cannot be looked at now is not judged.
    public static func lookAtRoot(_ layout: SpoolLayout, inode: UInt64) -> SpoolTrustError? {
        var st = stat()
        if lstat(layout.root, &st) != 0 { return errno == ENOENT ? .gone(path: layout.root) : nil }
        if UInt64(st.st_ino) != inode { return .gone(path: layout.root) }
        return refusal(layout.root).map { .untrusted(path: layout.root, reason: $0) }
    }

    /// The spool root's inode now (nil when it cannot be looked at).
    public static func rootInode(_ layout: SpoolLayout) -> UInt64? {
        var st = stat()
        return lstat(layout.root, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    static func isMember(of gid: gid_t) -> Bool {
        if gid == getegid() { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let n = getgroups(count, &groups)
        return n > 0 && groups.prefix(Int(n)).contains(gid)
    }

    /// The account's login name alone (for a command to run as it), or the uid.
    public static func accountName(_ uid: uid_t) -> String {
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return "\(uid)" }
        return String(cString: name)
    }

    static func userName(_ uid: uid_t) -> String {
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return "\(uid)" }
        return "\(String(cString: name)) (\(uid))"
    }

    static func groupName(_ gid: gid_t) -> String {
        guard let gr = getgrgid(gid), let name = gr.pointee.gr_name else { return "\(gid)" }
        return "\(String(cString: name)) (\(gid))"
    }
}
