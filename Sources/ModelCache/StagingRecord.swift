// StagingRecord - a staging file's progress: ranges and heads marked, the hash advanced over the
// contiguous done bytes, and the record persisted (data synced, then the sidecar written) after
// merging what the sidecar on disk lists.
import Digest
import Foundation
import SharedFiles

extension StagingFile {
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
    /// Once ranges other processes wrote in place were taken in (`readAfreshFromNowOn`), through a
    /// descriptor opened now: they are read as the file server has them.
    public func advanceHash() throws {
        guard file.sha256 != nil else { return }
        let (from, to, current) = lock.withLock {
            (record.hashedBytes,
             min(StagingFile.contiguousEnd(Set(record.done), rangeSize: rangeSize, size: file.size), repairCheckpoint), hasher)
        }
        guard to > from else { return }
        var h = current
        if readsAfresh {
            try readingAfresh { try h.update(fileDescriptor: $0, path: dataURL.path, from: from, to: to) }
        } else {
            try descriptor.borrow { try h.update(fileDescriptor: $0, path: dataURL.path, from: from, to: to) }
        }
        lock.withLock {
            if record.hashedBytes == from {  // nobody reset us meanwhile
                hasher = h
                record.hashedBytes = to
            }
        }
    }

    /// Ranges other processes wrote in place were taken in (a splicer folded in their records):
    /// from now on every read of the staging file (the hash, the finalize's check) goes through a
    /// descriptor opened afresh, not the one held since before those ranges were written.
    public func readAfreshFromNowOn() { lock.withLock { readsAfreshFlag = true } }

    var readsAfresh: Bool { lock.withLock { readsAfreshFlag } }

    /// Runs `body` with a read-only descriptor of the staging file opened now, when it is still
    /// the file this object opened (its inode): a network filesystem's client revalidates its
    /// cache at open, so ranges another client wrote, synced and closed are read as written.
    func readingAfresh<T>(_ body: (Int32) throws -> T) throws -> T {
        let path = dataURL.path
        // On a network or FUSE filesystem an open afresh is not enough: a GlusterFS client serves
        // for about a second the pages it read before another client wrote them (a region read,
        // written through another mount, synced and closed, then read again through a new
        // descriptor: stale, 3 of 3 tries; with O_DIRECT fresh). The read goes around the cache.
        var fd = isRemote ? SharedFS.retry { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | FileIO.directFlag) } : -1
        if fd < 0 { fd = SharedFS.retry { open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) } }
        guard fd >= 0 else { throw CacheError.io(path: path, operation: "open to read", errno: errno) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, UInt64(st.st_ino) == inode else {
            throw CacheError.io(path: path, operation: "read (it was replaced)", errno: ESTALE)
        }
        return try body(fd)
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
        let failure = try descriptor.borrow { fdatasync($0) == 0 ? 0 : errno }
        guard failure == 0 else { throw CacheError.io(path: dataURL.path, operation: "sync", errno: failure) }
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
}
