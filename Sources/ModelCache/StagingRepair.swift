// StagingRepair - what follows a digest mismatch of a file fetched in several ranges: the
// staged bytes are kept, ranges are fetched again a few at a time and compared with them, and
// the file is checked again as soon as some bytes changed.
//
// A flipped byte (a bad disk or cache upstream, a bit flip on the way) spoils one range, not
// the file: fetching the ranges again in order until the file verifies costs on average half
// the file, instead of all of it. The state is in the sidecar (`repair`), so a killed process's
// successor goes on with the repair where it stopped. The final digest stays the last word: a
// file is renamed into place only once it verifies, and one that still does not verify after
// every range was fetched again (twice for a range whose bytes changed) is deleted.
import Digest
import Foundation
import SharedFiles

/// The sidecar's record of a repair (`Sidecar.repair`).
public struct RepairRecord: Codable, Sendable, Equatable {
    /// Ranges fetched again whose bytes equalled the staged ones: never fetched a third time.
    public var confirmed: [Int] = []
    /// Ranges fetched again whose bytes differed and were replaced, once per time.
    public var replaced: [Int] = []
    /// Staged bytes changed since the digest was last computed: the file is checked again
    /// before the repair looks further. Recorded before the first changed byte is written.
    public var unverified = false
    /// What the staged bytes hashed to when last checked (the error's "got" if all fails).
    public var digest: String

    public init(digest: String) { self.digest = digest }

    /// A range is fetched again while it was not confirmed and was replaced fewer than twice
    /// (a second look settles a range whose refetch itself came with a flipped byte).
    func mayFetchAgain(_ index: Int) -> Bool {
        !confirmed.contains(index) && visits(index) < 2
    }

    func visits(_ index: Int) -> Int { replaced.filter { $0 == index }.count }
}

extension StagingFile {
    /// Ranges of this file fetched again at a time under repair (on either host): one per 16
    /// ranges of the file, 1 to 4. Each range in flight beside the bad one when it is found
    /// costs its bytes for nothing, so this keeps that waste within 1/16 of the file, while a
    /// large file is not repaired one range at a time.
    public var repairWindow: Int { min(4, max(1, rangeCount / 16)) }

    /// The file did not verify and its ranges are being fetched again (`Sidecar.repair`).
    public var isRepairing: Bool { lock.withLock { record.repair != nil } }

    /// Records that range `index` of a file under repair was fetched again and compared
    /// (`changed`: some of its bytes differed and were replaced). Returns the ranges to fetch
    /// next, already taken out of `done`: another one while nothing changed, none once bytes
    /// changed (the file is checked again when the ranges in flight are in). When nothing is
    /// left to fetch, the caller finalizes: that checks the file, or looks further, or gives up.
    public func markRepaired(_ index: Int, changed: Bool) -> [Int] {
        lock.withLock {
            guard record.repair != nil else { return [] }
            if !record.done.contains(index) { record.done.append(index) }
            if changed {
                record.repair?.replaced.append(index)
                record.repair?.unverified = true
            } else {
                record.repair?.confirmed.append(index)
            }
            return record.repair?.unverified == true ? [] : openRepairRanges()
        }
    }

    /// Writes bytes of a range under repair where they differ from the staged ones, after
    /// recording (durably) that the file must be checked again. Returns whether any differed.
    public func writeComparing(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws -> Bool {
        guard !bytes.isEmpty else { return false }
        let staged = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
        defer { staged.deallocate() }
        let (n, code) = try descriptor.borrow { fd -> (Int, Int32) in
            let n = FileIO.readFull(fd, into: staged, at: offset)
            return (n, n < 0 ? errno : EIO)
        }
        guard n == bytes.count else {
            throw CacheError.io(path: dataURL.path, operation: "read back (to compare) the staging file", errno: code)
        }
        if memcmp(staged.baseAddress!, bytes.baseAddress!, bytes.count) == 0 { return false }
        try noteRepairChange()
        try write(bytes, at: offset)
        return true
    }

    /// Compares a completed part (exactly range `index`) with the staged bytes and writes the
    /// ones that differ (`writeComparing`); returns whether any did. Marks nothing.
    public func spliceComparing(partAt partPath: String, index: Int) throws -> Bool {
        let (part, length) = try openPart(partPath, index: index, wholeRange: true)
        defer { close(part) }
        var changed = false
        try copyThroughMemory(from: part, partPath: partPath, at: 0, to: range(index).start, count: length, store: { chunk, offset in
            if try self.writeComparing(chunk, at: offset) { changed = true }
        })
        return changed
    }

    /// Marks the file as changed since its last check, in the sidecar, before the first byte
    /// changes: a successor of a process killed mid-range then checks the file again even
    /// though its own refetch of that range finds the bytes equal.
    func noteRepairChange() throws {
        let first = lock.withLock { () -> Bool in
            guard let repair = record.repair, !repair.unverified else { return false }
            record.repair?.unverified = true
            return true
        }
        if first { try persist() }
    }

    /// The file's digest from the hash's checkpoint to the end (only the tail after the
    /// checkpoint is read; under repair, bytes past it may still change).
    func wholeFileDigest() throws -> String {
        try advanceHash()
        let (from, checkpoint) = lock.withLock { (record.hashedBytes, hasher) }
        var h = checkpoint
        if from < file.size {
            if readsAfresh {
                try readingAfresh { try h.update(fileDescriptor: $0, path: dataURL.path, from: from, to: file.size) }
            } else {
                try descriptor.borrow { try h.update(fileDescriptor: $0, path: dataURL.path, from: from, to: file.size) }
            }
        }
        return h.finalizeHex()
    }

    /// After a mismatch (`digest`: what the staged bytes hash to): starts or goes on with the
    /// repair and throws `CacheError.repairing` with the ranges to fetch again; when no range
    /// may be fetched again, deletes it and throws the mismatch. A file of one range is fetched
    /// again once (a byte flipped on the way heals; a bad copy on the server fails the second time).
    func continueRepair(digest: String) throws -> Never {
        let mismatch = file.sha256.map { CacheError.checksumMismatch(path: file.path, expected: $0, actual: digest) }
            ?? CacheError.blobMismatch(path: file.path, expected: file.blobID, actual: digest)
        let next: [Int]? = lock.withLock {
            if record.repair == nil {
                // The hash restarts from 0: any range may change now, so only bytes no
                // refetch will touch again may be hashed ahead (`repairCheckpoint`).
                record.repair = RepairRecord(digest: digest)
                record.hashedBytes = 0
                record.hashState = nil
                record.partial = nil
                hasher = SHA256()
            }
            record.repair?.unverified = false
            record.repair?.digest = digest
            let opened = openRepairRanges()
            return opened.isEmpty && record.done.count == rangeCount ? nil : opened
        }
        guard let next else {
            discard()
            throw mismatch
        }
        try persist()
        throw CacheError.repairing(path: file.path, ranges: next)
    }

    /// Fills the repair's window (called under `lock`): takes the next ranges that may be
    /// fetched again out of `done`, those never fetched again first, in file order.
    func openRepairRanges() -> [Int] {
        guard let repair = record.repair else { return [] }
        let want = repairWindow - (rangeCount - record.done.count)
        guard want > 0 else { return [] }
        let done = Set(record.done)
        let chosen = (0..<rangeCount).filter { done.contains($0) && repair.mayFetchAgain($0) }
            .sorted { (repair.visits($0), $0) < (repair.visits($1), $1) }
            .prefix(want)
        record.done.removeAll { chosen.contains($0) }
        return Array(chosen)
    }

    /// Where the hash may advance to (called under `lock`): under repair, up to the first range
    /// that is in flight or may be fetched again; the whole file otherwise.
    var repairCheckpoint: Int64 {
        guard let repair = record.repair else { return file.size }
        let done = Set(record.done)
        guard let first = (0..<rangeCount).first(where: { !done.contains($0) || repair.mayFetchAgain($0) }) else { return file.size }
        return Int64(first) * rangeSize
    }
}
