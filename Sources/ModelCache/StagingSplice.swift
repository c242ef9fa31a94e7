// StagingSplice - a part (a file holding one range, whole or its head) copied into a staging
// file: reflink or copy_file_range on a local disk, through memory (hashing on the way) on a
// network filesystem; a part's size judged only on what was read consistently.
import CFileOps
import Digest
import Foundation
import SharedFiles

extension StagingFile {
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
        // The kernel's copy into the staging file, through its descriptor.
        return try descriptor.borrow { fd -> Int64 in
            if sf_clone_range(part, 0, length, fd, r.start) == 0 { return length }
            var inOffset: Int64 = 0
            var outOffset: Int64 = r.start
            while inOffset < length {
                let n = FileIO.restartingAfterSignal { sf_copy_file_range(part, &inOffset, fd, &outOffset, Int(length - inOffset)) }
                if n < 0 {
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
            let opened = try OpenedFile(path, flags: O_RDONLY | O_NOFOLLOW | O_CLOEXEC, opening: "open part", reading: "read the size of part")
            let fd = opened.fd, st = opened.facts
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
}
