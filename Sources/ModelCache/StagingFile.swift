// StagingFile - one in-flight file under `.incomplete/`: its bytes, its sidecar, and its finalization.
//
// The staging file is created at full size (sparse) and written at each range's offset; the
// sidecar records what a resume depends on. A sidecar that does not match the transfer
// (size, range size, commit, etag) is discarded together with the staging file.
import CFileOps
import Digest
import Foundation
import HubTypes
import SharedFiles

/// What the sidecar (`ModelLayout.sidecarName`) records.
public struct Sidecar: Codable, Sendable, Equatable {
    public var version = 1
    public var path: String
    public var size: Int64
    public var rangeSize: Int64
    public var commit: String
    /// sha256 for LFS files, the git blob id otherwise: the identity every range is pinned to.
    public var etag: String
    public var sha256: String?
    /// Indices of ranges whose bytes are durable in the staging file.
    public var done: [Int]
    /// Bytes from offset 0 already fed to `hashState`.
    public var hashedBytes: Int64
    /// Saved SHA-256 state (base64), valid for `hashedBytes`.
    public var hashState: String?
    /// Ranges not done whose first `bytes` are durable (recorded when a transfer stops early,
    /// e.g. the disk filled up), so a resume asks only for the rest of each. Absent in older
    /// sidecars.
    public var partial: [PartialRange]?
    /// The boot (`/proc/sys/kernel/random/boot_id`) in which `partial` was recorded without a
    /// sync of the staging file: its bytes are in the page cache, which survives a process kill
    /// but not a reboot, so another boot ignores it. Absent: `partial`'s bytes were synced.
    public var partialBoot: String?
    /// Present while the file is under repair (StagingRepair.swift): every range was fetched
    /// but the file did not verify, so ranges are fetched again and compared with the staged
    /// bytes. The ranges being fetched again are the ones missing from `done`. Absent in older
    /// sidecars (an older reader fetches those ranges plainly; the digest still decides).
    public var repair: RepairRecord?

    public init(path: String, size: Int64, rangeSize: Int64, commit: String, etag: String, sha256: String?,
                done: [Int], hashedBytes: Int64, hashState: String?, partial: [PartialRange]? = nil,
                partialBoot: String? = nil, repair: RepairRecord? = nil) {
        self.path = path
        self.size = size
        self.rangeSize = rangeSize
        self.commit = commit
        self.etag = etag
        self.sha256 = sha256
        self.done = done
        self.hashedBytes = hashedBytes
        self.hashState = hashState
        self.partial = partial
        self.partialBoot = partialBoot
        self.repair = repair
    }

    func matches(_ other: Sidecar) -> Bool {
        version == other.version && path == other.path && size == other.size && rangeSize == other.rangeSize
            && commit == other.commit && etag == other.etag && sha256 == other.sha256
    }

    /// The sidecar at `path`: found (nil when it does not decode), positively absent, or unknown
    /// (a read that failed: the progress it records must not be taken for lost).
    public static func look(at path: String) -> Lookup<Sidecar?> {
        switch SharedFS.read(path) {
        case .found(let data): return .found(try? JSONDecoder().decode(Sidecar.self, from: data))
        case .absent: return .absent
        case .unknown(let code): return .unknown(code)
        }
    }

    /// The sidecar of `repoPath`'s staging file in `directory`, as `look(at:)` reads it.
    public static func look(_ repoPath: String, in directory: ModelDirectory) -> Lookup<Sidecar?> {
        look(at: StagingFile.sidecarURL(repoPath, in: directory).path)
    }
}

/// The durable head of a range that is not done: its first `bytes` bytes are on disk.
public struct PartialRange: Codable, Sendable, Equatable {
    public let index: Int
    public let bytes: Int64

    public init(index: Int, bytes: Int64) {
        self.index = index
        self.bytes = bytes
    }
}

/// A staged file. Ranges are written concurrently with `write(_:at:)`; bookkeeping is locked.
public final class StagingFile: @unchecked Sendable {
    public let file: RepoFile
    public let directory: ModelDirectory
    public let rangeSize: Int64
    public let rangeCount: Int
    public let dataURL: URL
    public let sidecarURL: URL
    let fd: Int32
    /// The staging file's inode when opened: finalize renames only this file, never one that
    /// replaced it at the same path.
    private let inode: UInt64
    let lock = NSLock()
    var record: Sidecar
    var hasher: SHA256
    /// One sidecar write at a time, each from a record taken inside it: a later write never
    /// lands an older record.
    private let persistLock = NSLock()
    /// True when the progress came from a sidecar that was there (false: this object started the
    /// file, or found a sidecar of another transfer). Only then does `persist` fold in what the
    /// sidecar on disk lists (`mergeRecorded`), and only until `resetProgress`.
    public let openedFromRecord: Bool
    private var merging: Bool
    /// Whether the staging file is on a network or FUSE filesystem (how parts are spliced in).
    private let isRemote: Bool

    /// Opens (or creates) the staging file for `file`, keeping prior progress only when its sidecar
    /// matches this transfer. Returns with the ranges already done.
    public init(file: RepoFile, in directory: ModelDirectory, commit: String, rangeSize: Int64) throws {
        try CryptoLibrary.load()  // the hasher below; a missing library is an error here, not a trap
        self.file = file
        self.directory = directory
        let staging = directory.stagingDirectory
        dataURL = staging.appendingPathComponent(ModelLayout.stagingName(file.path))
        sidecarURL = StagingFile.sidecarURL(file.path, in: directory)
        let asked = Sidecar(path: file.path, size: file.size, rangeSize: max(1, file.size > 0 ? min(rangeSize, file.size) : 1), commit: commit,
                             etag: file.sha256 ?? file.blobID, sha256: file.sha256, done: [], hashedBytes: 0, hashState: nil)

        try ModelDirectory.makeDirectories(staging.path)
        var kept: Sidecar?
        var wanted = asked
        // A sidecar that cannot be read (a stale handle, EIO) is not a missing one: the progress
        // it records must not be thrown away. The caller tries again later.
        let found: Sidecar?
        switch Sidecar.look(at: sidecarURL.path) {
        case .found(let record): found = record
        case .absent: found = nil
        case .unknown(let code): throw CacheError.io(path: sidecarURL.path, operation: "read the sidecar", errno: code)
        }
        if let old = found {
            // Another host may split files differently (its own HF_DOWNLOAD_RANGE_CHUNK): its
            // ranges are kept, in its range size, rather than thrown away.
            var sameButRanges = wanted
            sameButRanges.rangeSize = old.rangeSize
            if old.rangeSize > 0, old.rangeSize % (64 << 10) == 0 || old.rangeSize == file.size, old.matches(sameButRanges) {
                wanted = sameButRanges
                kept = old
            }
        }
        if kept == nil {
            // No sidecar, or one for another transfer: the staged bytes cannot be trusted.
            unlink(sidecarURL.path)
            unlink(dataURL.path)
        }
        self.rangeSize = wanted.rangeSize
        self.rangeCount = file.size == 0 ? 0 : Int((file.size + wanted.rangeSize - 1) / wanted.rangeSize)
        let path = dataURL.path
        let fd = SharedFS.retry { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        guard fd >= 0 else { throw CacheError.io(path: dataURL.path, operation: "create staging file", errno: errno) }
        var st = stat()
        guard SharedFS.retry({ fstat(fd, &st) }) == 0 else {
            let code = errno
            close(fd)
            throw CacheError.io(path: dataURL.path, operation: "read the size of the staging file", errno: code)
        }
        if Int64(st.st_size) != file.size {
            if kept != nil && Int64(st.st_size) < file.size { kept = nil }  // truncated under us: start over
            guard ftruncate(fd, off_t(file.size)) == 0 else {
                let code = errno
                close(fd)
                throw CacheError.io(path: dataURL.path, operation: "size staging file", errno: code)
            }
        }
        self.fd = fd
        self.inode = UInt64(st.st_ino)
        isRemote = FilesystemKind.isRemote(fileDescriptor: fd)
        var record = kept ?? wanted
        let count = rangeCount
        record.done = record.done.filter { $0 >= 0 && $0 < count }
        let doneSet = Set(record.done)
        let size = file.size
        let ranges = wanted.rangeSize
        // Heads recorded without a sync count only in the boot that wrote them: after a power
        // loss those bytes may be garbage.
        let trusted = record.partialBoot == nil || record.partialBoot == BootIdentity.id
        // A head as long as its range is a range a killed process finished but had not yet
        // recorded after a sync (`persist`): done here, though not durable until the next sync.
        let finished = trusted ? Set((record.partial ?? []).filter { p in
            p.index >= 0 && p.index < count && !doneSet.contains(p.index)
                && p.bytes == min(size, Int64(p.index + 1) * ranges) - Int64(p.index) * ranges
        }.map(\.index)) : []
        let synced = record.done.sorted()
        record.done += finished.sorted()
        record.partial = trusted ? record.partial?.filter { p in
            p.index >= 0 && p.index < count && !doneSet.contains(p.index) && p.bytes > 0
                && p.bytes < min(size, Int64(p.index + 1) * ranges) - Int64(p.index) * ranges
        } : nil
        if record.partial?.isEmpty == true { record.partial = nil }
        record.partialBoot = nil
        var hasher = SHA256()
        if let state = record.hashState, let data = Data(base64Encoded: state), let restored = SHA256(savedState: data),
           restored.count == record.hashedBytes,
           record.hashedBytes <= StagingFile.contiguousEnd(Set(record.done), rangeSize: wanted.rangeSize, size: file.size) {
            hasher = restored
        } else {
            record.hashedBytes = 0
            record.hashState = nil
        }
        self.record = record
        self.hasher = hasher
        openedFromRecord = kept != nil
        merging = kept != nil
        durableDone = synced
        if kept == nil && count > 1 {
            // A sidecar from the start: whatever stops this transfer (a full disk before any
            // range is done), the next call finds the staging file it belongs to and keeps it.
            try persist()
        }
    }

    /// The done ranges of the last record written after a sync of the staging file.
    private var durableDone: [Int] = []

    deinit { close(fd) }

    public var doneRanges: Set<Int> { lock.withLock { Set(record.done) } }

    public func range(_ index: Int) -> (start: Int64, end: Int64) {
        let start = Int64(index) * rangeSize
        return (start, min(file.size, start + rangeSize) - 1)
    }

    /// Writes bytes at a file offset (any thread; each range has one writer).
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        if let code = FileIO.writeAll(fd, bytes, at: offset) {
            throw CacheError.io(path: dataURL.path, operation: "write", errno: code)
        }
    }

    /// Copies a completed part (a file holding exactly range `index`) into place in the kernel
    /// (reflink where the filesystem shares blocks, else copy_file_range), without marking it done.
    public func splice(partAt partPath: String, index: Int) throws {
        _ = try splice(partAt: partPath, index: index, wholeRange: true)
    }

    /// Copies the first bytes of range `index` from a part a worker did not finish (a file
    /// holding a prefix of the range) into place; returns how many. Marks nothing: the caller
    /// records them (`recordPartial`) for the next `persist`, which syncs them first.
    public func splicePrefix(partAt partPath: String, index: Int) throws -> Int64 {
        try splice(partAt: partPath, index: index, wholeRange: false)
    }

    /// Opens a part of range `index` and checks its size: the whole range, or (not `wholeRange`)
    /// at most it. The caller closes the descriptor.
    func openPart(_ partPath: String, index: Int, wholeRange: Bool) throws -> (fd: Int32, size: Int64) {
        let r = range(index)
        let rangeLength = r.end - r.start + 1
        let fits: (Int64) -> Bool = { wholeRange ? $0 == rangeLength : $0 <= rangeLength }
        return try StagingFile.openPart(partPath, fits: fits, expected: rangeLength)
    }

    private func splice(partAt partPath: String, index: Int, wholeRange: Bool) throws -> Int64 {
        let r = range(index)
        let (part, length) = try openPart(partPath, index: index, wholeRange: wholeRange)
        defer { close(part) }
        if length == 0 { return 0 }
        // On a network filesystem, a whole part that continues the hashed prefix is copied through
        // memory and hashed on the way: its bytes are read once, instead of copied in the kernel and
        // read back for the hash (through a network filesystem's client, the read-back is most of a
        // splice's cost). On a local disk the kernel's copy and a read-back from the page cache cost
        // a third of that (docs/benchmarks.md, scenario 4). A prefix is never hashed: the hash
        // covers done ranges only (and, under repair, only up to `repairCheckpoint`).
        if wholeRange, isRemote, file.sha256 != nil,
           let prefix = lock.withLock({ record.hashedBytes == r.start && record.repair == nil ? hasher : nil }) {
            var h = prefix
            try copyThroughMemory(from: part, partPath: partPath, at: 0, to: r.start, count: length, each: { h.update($0) })
            lock.withLock {
                if record.hashedBytes == r.start {  // nobody reset or advanced us meanwhile
                    hasher = h
                    record.hashedBytes = r.start + length
                }
            }
            return length
        }
        if sf_clone_range(part, 0, length, fd, r.start) == 0 { return length }
        var inOffset: Int64 = 0
        var outOffset: Int64 = r.start
        while inOffset < length {
            let n = sf_copy_file_range(part, &inOffset, fd, &outOffset, Int(length - inOffset))
            if n < 0 {
                if errno == EINTR { continue }
                // Across filesystems (EXDEV) or where the kernel cannot: copy through memory.
                if [EXDEV, EOPNOTSUPP, ENOSYS, EINVAL, EBADF].contains(errno) {
                    try copyThroughMemory(from: part, partPath: partPath, at: inOffset, to: outOffset, count: length - inOffset)
                    return length
                }
                throw CacheError.io(path: dataURL.path, operation: "splice a part into", errno: errno)
            }
            // Shorter than the size just read: the client contradicts itself; keep the part for a later look.
            if n == 0 { throw CacheError.io(path: partPath, operation: "read all \(length) bytes of part", errno: EAGAIN) }
        }
        return length
    }

    /// Opens a part and reads its size, judged only on what was read consistently. A size that
    /// does not fit may be a client's cached attribute: a node that looked at the part while its
    /// writer was still writing it (as endgame and adoption do, under its temp name) can be
    /// served that size for about a second after the part was published. Such a part is opened
    /// again by path, a few times over a little more than two seconds; it is of the wrong size
    /// (`CacheError.sizeMismatch`, and dropped by the caller) only when every look read the same
    /// size, and unknown (`CacheError.io`, EAGAIN: kept) when the looks disagree. A size that
    /// cannot be read is not a wrong one either.
    static func openPart(_ path: String, fits: (Int64) -> Bool, expected: Int64) throws -> (fd: Int32, size: Int64) {
        var sizes: [Int64] = []
        var delay = 0.05
        while true {
            let fd = SharedFS.retry { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
            guard fd >= 0 else { throw CacheError.io(path: path, operation: "open part", errno: errno) }
            var st = stat()
            guard SharedFS.retry({ fstat(fd, &st) }) == 0 else {
                let code = errno
                close(fd)
                throw CacheError.io(path: path, operation: "read the size of part", errno: code)
            }
            let size = Int64(st.st_size)
            if fits(size) { return (fd, size) }
            close(fd)
            sizes.append(size)
            guard sizes.count < 7 else { break }
            Thread.sleep(forTimeInterval: delay)
            delay = min(delay * 2, 0.5)
        }
        guard Set(sizes).count == 1 else {
            throw CacheError.io(path: path, operation: "read a steady size (\(sizes.map { String($0) }.joined(separator: ", ")) bytes) of part", errno: EAGAIN)
        }
        throw CacheError.sizeMismatch(path: path, expected: expected, actual: sizes[0])
    }

    /// Copies `count` bytes of a part from `start` to file offset `destination` through a
    /// buffer, handing each chunk to `store` (default: `write`) and then to `each`.
    func copyThroughMemory(from part: Int32, partPath: String, at start: Int64, to destination: Int64, count: Int64,
                           store: ((UnsafeRawBufferPointer, Int64) throws -> Void)? = nil,
                           each: (UnsafeRawBufferPointer) -> Void = { _ in }) throws {
        var done: Int64 = 0
        let read = try FileIO.stream(part, from: start, to: start + count) { chunk in
            if let store { try store(chunk, destination + done) } else { try write(chunk, at: destination + done) }
            each(chunk)
            done += Int64(chunk.count)
            return true
        }
        if let code = read.errno { throw CacheError.io(path: partPath, operation: "read part", errno: code) }
        if read.bytes < count { throw CacheError.io(path: partPath, operation: "read all \(start + count) bytes of part", errno: EAGAIN) }
    }

    public func markDone(_ index: Int) {
        lock.withLock {
            if !record.done.contains(index) { record.done.append(index) }
            record.partial?.removeAll { $0.index == index }
        }
    }

    /// Bytes of range `index` a previous transfer left durable (0 when none): a resume starts after them.
    public func partialBytes(_ index: Int) -> Int64 {
        lock.withLock { record.partial?.first { $0.index == index }?.bytes ?? 0 }
    }

    /// Records that the first `bytes` of range `index` are written; they count once the next
    /// `persist` has synced them (it syncs before it writes the sidecar).
    public func recordPartial(_ index: Int, bytes: Int64) {
        lock.withLock {
            // A range under repair has no durable head: its bytes are compared, not counted.
            guard !record.done.contains(index), record.repair == nil else { return }
            var list = record.partial ?? []
            list.removeAll { $0.index == index }
            if bytes > 0 { list.append(PartialRange(index: index, bytes: bytes)) }
            record.partial = list.isEmpty ? nil : list.sorted { $0.index < $1.index }
        }
    }

    /// Records every range as done (a whole-file stream finished).
    public func markAllDone() {
        lock.withLock { record.done = Array(0..<rangeCount) }
    }

    /// Forgets every range (the server ignored Range and the file restarts as one stream).
    public func resetProgress() {
        lock.withLock {
            merging = false  // what the old sidecar lists is being overwritten
            record.done = []
            record.partial = nil
            record.repair = nil
            record.hashedBytes = 0
            record.hashState = nil
            hasher = SHA256()
        }
    }

    public var isFullyDone: Bool { lock.withLock { record.done.count == rangeCount } }

    /// Feeds the hash with the bytes that are now contiguous from the start (read back from the
    /// page cache), so verification at the end has little left to do.
    public func advanceHash() throws {
        guard file.sha256 != nil else { return }
        let (from, to, current) = lock.withLock {
            (record.hashedBytes,
             min(StagingFile.contiguousEnd(Set(record.done), rangeSize: rangeSize, size: file.size), repairCheckpoint), hasher)
        }
        guard to > from else { return }
        var h = current
        try h.update(fileDescriptor: fd, path: dataURL.path, from: from, to: to)
        lock.withLock {
            if record.hashedBytes == from {  // nobody reset us meanwhile
                hasher = h
                record.hashedBytes = to
            }
        }
    }

    /// Makes the done ranges durable, then records them (fdatasync before the sidecar rename).
    ///
    /// `unsyncedHeads`: when only the heads of ranges in flight (`partial`) moved since the last
    /// synced record, skip the data sync; the record then names this boot (`partialBoot`) and
    /// its heads count only until a reboot (a process kill leaves them in the page cache). When
    /// ranges were done since, they are first recorded that way too, as heads as long as their
    /// range, then synced and recorded as done.
    public func persist(unsyncedHeads: Bool = false) throws {
        persistLock.lock()
        defer { persistLock.unlock() }
        // Take the record first: a range marked done after this point was not covered by the
        // sync below and must wait for the next one.
        var snapshot: Sidecar = lock.withLock {
            var r = record
            r.done.sort()
            r.hashState = r.hashedBytes > 0 ? hasher.savedState.base64EncodedString() : nil
            return r
        }
        mergeRecorded(into: &snapshot)
        let durable = lock.withLock { durableDone }
        let boot = unsyncedHeads ? BootIdentity.id : nil
        if let boot, snapshot.done == durable, snapshot.partial != nil {
            snapshot.partialBoot = boot
            return try writeRecord(snapshot)
        }
        if let boot, snapshot.done != durable {
            // Ranges done since the last synced record are recorded first as heads as long as
            // their range, for this boot only (their bytes are in the page cache, which a kill
            // leaves): a process killed during the sync below loses none of them. After a power
            // loss they count for nothing, like any head.
            var early = snapshot
            let synced = Set(durable)
            early.done = snapshot.done.filter { synced.contains($0) }
            early.partial = ((snapshot.partial ?? []) + snapshot.done.filter { !synced.contains($0) }.map { index in
                PartialRange(index: index, bytes: range(index).end - range(index).start + 1)
            }).sorted { $0.index < $1.index }
            early.partialBoot = boot
            try writeRecord(early)
        }
        guard fdatasync(fd) == 0 else { throw CacheError.io(path: dataURL.path, operation: "sync", errno: errno) }
        snapshot.partialBoot = nil
        try writeRecord(snapshot)
        lock.withLock { durableDone = snapshot.done }
    }

    /// Writes a record as the sidecar (temp file, fsync, rename; in place when the disk is full).
    private func writeRecord(_ snapshot: Sidecar) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(snapshot)
        do {
            try CacheError.saying { try AtomicFile.write(data, to: sidecarURL) }
        } catch CacheError.io(_, _, let code) where DiskSpace.isFull(code) {
            // The disk is full: no room for the temp file. The sidecar's own block is already
            // allocated, so it is rewritten in place; a torn write (a crash right now) only makes
            // it unreadable, which restarts the file: never wrong bytes.
            try rewriteInPlace(data, at: sidecarURL.path)
        }
    }

    /// Folds into `snapshot` (and this object's record) the done ranges the sidecar on disk lists
    /// and the record lacks. Every writer of the sidecar holds the staging lock, so the one on
    /// disk is the last holder's; but a network filesystem's client can serve a renamed-over
    /// file's old content for about a second, so the record this object opened with may be
    /// older than it. Writing that record back would drop the ranges the last holder added, whose
    /// parts may already be gone: neither done nor fetched, they would be fetched again. The
    /// ranges listed on disk were synced by their writer before it listed them. A read that
    /// fails, or a sidecar of another transfer, adds nothing.
    private func mergeRecorded(into snapshot: inout Sidecar) {
        // Under repair, ranges leave `done` on purpose (to be fetched again): nothing is folded in.
        guard lock.withLock({ merging }), snapshot.repair == nil, let data = SharedFS.read(sidecarURL.path).value,
              let disk = try? JSONDecoder().decode(Sidecar.self, from: data), disk.matches(snapshot),
              disk.repair == nil else { return }
        let count = rangeCount
        let extra = Set(disk.done.filter { $0 >= 0 && $0 < count }).subtracting(snapshot.done)
        guard !extra.isEmpty else { return }
        func folding(_ r: inout Sidecar) {
            r.done = Array(Set(r.done).union(extra)).sorted()
            r.partial = r.partial?.filter { !extra.contains($0.index) }
            if r.partial?.isEmpty == true { r.partial = nil }
        }
        folding(&snapshot)
        lock.withLock { if merging { folding(&record) } }
    }

    private func rewriteInPlace(_ data: Data, at path: String) throws {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw CacheError.io(path: path, operation: "rewrite (disk full)", errno: errno) }
        defer { close(fd) }
        let written = data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == data.count, ftruncate(fd, off_t(data.count)) == 0, fsync(fd) == 0 else {
            throw CacheError.io(path: path, operation: "rewrite (disk full)", errno: errno)
        }
    }

    /// Bytes still to fetch: the file minus done ranges and the durable heads of the others.
    public var remainingBytes: Int64 {
        lock.withLock {
            let done = record.done.reduce(Int64(0)) { sum, i in
                sum + min(file.size, Int64(i + 1) * rangeSize) - Int64(i) * rangeSize
            }
            return max(0, file.size - done - (record.partial ?? []).reduce(0) { $0 + $1.bytes })
        }
    }

    /// Checks size and content (SHA-256 for LFS files, the git blob id for the rest), then renames
    /// the file into place. A file of several ranges that does not verify is kept and repaired:
    /// `CacheError.repairing` names the ranges to fetch again (StagingRepair.swift); a file that
    /// cannot be repaired (one range, or every range fetched again) is deleted with its sidecar
    /// and the error says so: a corrupt file is never cached.
    public func finalize() throws {
        var st = stat()
        // An unreadable size is not a wrong size: nothing is discarded on a stale handle.
        guard SharedFS.retry({ fstat(fd, &st) }) == 0 else {
            throw CacheError.io(path: dataURL.path, operation: "read the size of the staging file", errno: errno)
        }
        if Int64(st.st_size) != file.size {
            discard()
            throw CacheError.sizeMismatch(path: file.path, expected: file.size, actual: Int64(st.st_size))
        }
        if let repair = lock.withLock({ record.repair }), !repair.unverified {
            // Under repair and no byte changed since the digest last failed: look further.
            try continueRepair(digest: repair.digest)
        }
        if let expected = file.sha256 {
            let actual = try wholeFileDigest()
            if actual != expected { try continueRepair(digest: actual) }
        } else {
            // A file git stores itself (config, tokenizer): its blob id is the check. These are
            // small on the Hub, so they are hashed here in one pass from the page cache.
            let actual = try SHA1.gitBlobID(fileDescriptor: fd, path: dataURL.path, size: file.size)
            if actual != file.blobID.lowercased() { try continueRepair(digest: actual) }
        }
        ModelDirectory.recordContentID(file, fd: fd)
        guard fsync(fd) == 0 else { throw CacheError.io(path: dataURL.path, operation: "sync", errno: errno) }
        switch SharedFS.lstat(dataURL.path) {
        case .found(let onDisk) where UInt64(onDisk.st_ino) == inode:
            break
        case .found, .absent:
            throw CacheError.io(path: dataURL.path, operation: "finalize (it was replaced or deleted meanwhile) the staging file", errno: ESTALE)
        case .unknown(let code):
            throw CacheError.io(path: dataURL.path, operation: "look up (before the rename into place) the staging file", errno: code)
        }
        if directory.hubCommit != nil {
            // huggingface_hub gives a blob the mode a new file in the cache gets (0666 less the umask).
            fchmod(fd, 0o666 & ~StagingFile.umaskValue)
            try directory.installBlob(from: dataURL.path, file: file)
        } else {
            let target = directory.finalURL(file.path)
            try ModelDirectory.makeDirectories(target.deletingLastPathComponent().path)
            guard rename(dataURL.path, target.path) == 0 else {
                throw CacheError.io(path: target.path, operation: "rename into place", errno: errno)
            }
        }
        unlink(sidecarURL.path)
        StagingFile.removeStagingIfEmpty(directory)
    }

    /// This process's umask, read from /proc (calling umask(2) to read it would race other threads).
    static let umaskValue: mode_t = {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
              let value = mode_t(line.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) else { return 0o022 }
        return value
    }()

    /// Deletes the staged bytes and the sidecar.
    public func discard() {
        unlink(dataURL.path)
        unlink(sidecarURL.path)
        StagingFile.removeStagingIfEmpty(directory)
    }

    public static func removeStagingIfEmpty(_ directory: ModelDirectory) {
        rmdir(directory.stagingDirectory.path)  // fails harmlessly while anything is left
    }

    /// Bytes from offset 0 that `done` covers without a gap (at most `size`).
    public static func contiguousEnd(_ done: Set<Int>, rangeSize: Int64, size: Int64) -> Int64 {
        var i = 0
        while done.contains(i) { i += 1 }
        return min(size, Int64(i) * rangeSize)
    }

    /// The sidecar of a repo path's staging file in a model directory.
    public static func sidecarURL(_ repoPath: String, in directory: ModelDirectory) -> URL {
        directory.stagingDirectory.appendingPathComponent(ModelLayout.sidecarName(repoPath))
    }
}
