// StagedRange - a range a worker writes straight into its file's staging file, and the record
// that says it is there (docs/protocol.md, "fetch", "publish", "splice"). The staging file is
// opened under the judged target (TargetAnchor: no link followed) and named by the tag its
// sidecar holds and its inode; the part a worker publishes for such a range holds no bytes of
// it: its first line names that staging file and the range, so the splicer trusts it only for
// the very file it was written into, and folds it in without copying a byte.
import Foundation
import ModelCache
import SharedFiles

/// One claimed range being written in place: the staging file's descriptor (write only) and the
/// tag and inode that name that staging file in the range's record.
public final class StagedRange: @unchecked Sendable {
    public let fd: Int32
    public let record: StagedRangeRecord
    private var open = true

    init(fd: Int32, record: StagedRangeRecord) {
        self.fd = fd
        self.record = record
    }

    deinit { if open { close(fd) } }

    /// Makes the range's bytes durable and closes the descriptor (a network filesystem reports a
    /// failed write at close; its client sends what was written by then: close-to-open).
    func syncAndClose() throws {
        guard open else { return }
        open = false
        let synced = fdatasync(fd) == 0 ? 0 : errno
        let closed = close(fd) == 0 ? 0 : errno
        if synced != 0 || closed != 0 {
            throw CacheError.io(path: "the staging file", operation: synced != 0 ? "sync the range written into" : "close", errno: synced != 0 ? synced : closed)
        }
    }
}

/// The first line of a range's record: "this range's bytes are in place in the staging file of
/// this tag and inode". The rest of the record is a hole as long as the range.
public struct StagedRangeRecord: Sendable, Equatable {
    public let tag: String
    public let inode: UInt64
    public let index: Int

    static let magic = "speech-fetch staged range 1"
    /// The longest first line read back.
    static let maxLine = 256

    public init(tag: String, inode: UInt64, index: Int) {
        self.tag = tag
        self.inode = inode
        self.index = index
    }

    var line: Data { Data("\(StagedRangeRecord.magic) \(tag) \(inode) \(index)\n".utf8) }

    /// True when the record names `staging` (its tag and inode) and range `index`.
    public func names(_ staging: StagingFile, index: Int) -> Bool {
        self.index == index && inode == staging.inode && staging.stagingTag == tag
    }

    /// The part at `path` read back: found with its record, found and not a record (a part that
    /// holds its range's bytes), absent, or unknown (a read that failed: look again).
    public static func look(at path: String) -> Lookup<StagedRangeRecord?> {
        let fd = SharedFS.retry { Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return errno == ENOENT || errno == ENOTDIR ? .absent : .unknown(errno) }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: maxLine)
        let n = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, maxLine, 0) }
        guard n >= 0 else { return .unknown(errno) }
        return .found(parse(Data(head[0..<n])))
    }

    static func parse(_ head: Data) -> StagedRangeRecord? {
        guard head.starts(with: Data((magic + " ").utf8)), let end = head.firstIndex(of: UInt8(ascii: "\n")),
              let text = String(data: head[head.startIndex..<end], encoding: .utf8) else { return nil }
        let fields = text.dropFirst(magic.count + 1).split(separator: " ")
        guard fields.count == 3, let inode = UInt64(fields[1]), let index = Int(fields[2]), index >= 0 else { return nil }
        return StagedRangeRecord(tag: String(fields[0]), inode: inode, index: index)
    }
}

extension Spool {
    /// The shortest range written in place: its record's first line must fit in it.
    static let shortestStagedRange: Int64 = 4096

    /// The staging file of `claim`'s range, opened to write the range in place; nil when the
    /// range is to be fetched into a part of its own instead: a file of one range (it has no
    /// sidecar before it is final, and its splicer makes its staging file), a range shorter than
    /// a record's line, a sidecar without a tag (written by an older version), a file under
    /// repair (a range fetched again is compared with the staged bytes, so it comes as a part),
    /// or a staging file that cannot be opened now under the judged target.
    public func openStagedRange(_ claim: ClaimedJob) -> StagedRange? {
        let plan = claim.plan
        let r = plan.range(claim.index)
        guard plan.rangeCount > 1, r.end - r.start + 1 >= Spool.shortestStagedRange,
              case .success(let anchor) = anchor(plan, creating: false) else { return nil }
        return withExtendedLifetime(anchor) { () -> StagedRange? in
            guard case .found(let found) = Sidecar.look(plan.file.path, in: anchor.directory), let sidecar = found,
                  let tag = sidecar.stagingTag, sidecar.repair == nil, sidecar.rangeSize == plan.rangeSize,
                  sidecar.size == plan.file.size, sidecar.commit == plan.commit else { return nil }
            let path = anchor.directory.stagingPath(ModelLayout.stagingName(plan.file.path))
            let fd = SharedFS.retry { Glibc.open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) }
            guard fd >= 0 else { return nil }
            var st = stat()
            guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int64(st.st_size) == plan.file.size else {
                close(fd)
                return nil
            }
            return StagedRange(fd: fd, record: StagedRangeRecord(tag: tag, inode: UInt64(st.st_ino), index: claim.index))
        }
    }

    /// Where a worker keeps the progress record of a range it writes in place (tagged with the
    /// staging file's tag: only a claimant writing into that same staging file adopts it).
    public func partTempPath(_ claim: ClaimedJob, staged: StagedRange) -> String {
        tempPath(SpoolLayout.partTempHint(claim.name, tag: staged.record.tag))
    }

    /// Publishes a range written in place: the staging file synced and closed first, then the
    /// record's first line written and synced, then published as any part (`publishPart`).
    /// False when another part of the range was published first.
    @discardableResult
    public func publishStagedRange(_ staged: StagedRange, progress temp: String, for claim: ClaimedJob) throws -> Bool {
        try staged.syncAndClose()
        let fd = SharedFS.retry { Glibc.open(temp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw CacheError.io(path: temp, operation: "open the record", errno: errno) }
        let failure: Int32? = staged.record.line.withUnsafeBytes { FileIO.writeAll(fd, $0, at: 0) } ?? (fsync(fd) == 0 ? nil : errno)
        let closed = close(fd) == 0 ? nil : errno
        if let code = failure ?? closed { throw CacheError.io(path: temp, operation: "write the record", errno: code) }
        refresh(claim)
        return try publishPart(temp, for: claim)
    }
}
