// StagingFile - one in-flight file under `.incomplete/`: opened (resuming from its sidecar when
// `Sidecar.resumable` allows), written at each range's offset. Parts are spliced in
// (StagingSplice.swift), progress is recorded in the sidecar (StagingRecord.swift), and the file
// is checked and renamed into place (StagingFinalize.swift) or repaired (StagingRepair.swift).
//
// The staging file is created at full size (sparse). A sidecar that does not match the transfer
// (size, range size, commit, etag) is discarded together with the staging file.
import Digest
import Foundation
import HubTypes
import SharedFiles

/// A staged file. Ranges are written concurrently with `write(_:at:)`; bookkeeping is locked.
public final class StagingFile: @unchecked Sendable {
    public let file: RepoFile
    public let directory: ModelDirectory
    public let rangeSize: Int64
    public let rangeCount: Int
    public let dataURL: URL
    public let sidecarURL: URL
    /// The staging file's descriptor, borrowed by every use (StagingDescriptor.swift).
    let descriptor: StagingDescriptor
    /// The staging file's inode when opened: finalize renames only this file, never one that
    /// replaced it at the same path.
    public let inode: UInt64
    let lock = NSLock()
    var record: Sidecar
    var hasher: SHA256
    /// One sidecar write at a time, each from a record taken inside it: a later write never
    /// lands an older record.
    let persistLock = NSLock()
    /// True when the progress came from a sidecar that was there (false: this object started the
    /// file, or found a sidecar of another transfer). Only then does `persist` fold in what the
    /// sidecar on disk lists (`mergeRecorded`), and only until `resetProgress`.
    public let openedFromRecord: Bool
    var merging: Bool
    /// Whether the staging file is on a network or FUSE filesystem (how parts are spliced in).
    public let isRemote: Bool

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
        if let old = found, let resumable = Sidecar.resumable(old, asked: asked) {
            wanted.rangeSize = resumable.rangeSize
            kept = resumable
        }
        if kept == nil {
            // No sidecar, or one for another transfer: the staged bytes cannot be trusted.
            unlink(sidecarURL.path)
            unlink(dataURL.path)
        }
        self.rangeSize = wanted.rangeSize
        self.rangeCount = file.size == 0 ? 0 : Int((file.size + wanted.rangeSize - 1) / wanted.rangeSize)
        let path = dataURL.path
        let opened = try OpenedFile(path, flags: O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o644,
                                      opening: "create staging file", reading: "read the size of the staging file")
        let fd = opened.fd, st = opened.facts
        if Int64(st.st_size) != file.size {
            if kept != nil && Int64(st.st_size) < file.size { kept = nil }  // truncated under us: start over
            guard ftruncate(fd, off_t(file.size)) == 0 else {
                let code = errno
                close(fd)
                throw CacheError.io(path: dataURL.path, operation: "size staging file", errno: code)
            }
        }
        descriptor = StagingDescriptor(path: path, fd: fd, inode: UInt64(st.st_ino))
        self.inode = UInt64(st.st_ino)
        isRemote = FilesystemKind.isRemote(fileDescriptor: fd)
        var record = kept ?? wanted
        // A file started afresh gets a new tag (a kept record keeps its own, or has none: an
        // older sidecar's ranges come as parts until the file is started over).
        if kept == nil { record.stagingTag = StagingFile.newStagingTag() }
        let count = rangeCount
        let synced = record.trustHeads(rangeCount: count, size: file.size, boot: BootIdentity.id)
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

    /// The random tag the sidecar gives this staging file (nil: an older sidecar gave none).
    public var stagingTag: String? { lock.withLock { record.stagingTag } }

    static func newStagingTag() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in String(generator.next() as UInt64, radix: 16) }.joined(separator: "-")
    }

    /// Set once ranges written in place by other processes were taken in (`readAfreshFromNowOn`).
    var readsAfreshFlag = false

    /// The done ranges of the last record written after a sync of the staging file.
    var durableDone: [Int] = []

    /// Keeps the descriptor open only while a use needs it (StagingDescriptor.swift): for a host
    /// that stages a whole selection at once.
    public func closeDescriptorWhenIdle() { descriptor.closeWhenIdle() }

    /// Holds the descriptor open while a range is in flight (its chunks do not reopen the file).
    public func holdDescriptor() { descriptor.hold() }

    /// Ends a `holdDescriptor`.
    public func releaseDescriptor() { descriptor.release() }

    public var doneRanges: Set<Int> { lock.withLock { Set(record.done) } }

    public func range(_ index: Int) -> (start: Int64, end: Int64) {
        let start = Int64(index) * rangeSize
        return (start, min(file.size, start + rangeSize) - 1)
    }

    /// Writes bytes at a file offset (any thread; each range has one writer).
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        if let code = try descriptor.borrow({ FileIO.writeAll($0, bytes, at: offset) }) {
            throw CacheError.io(path: dataURL.path, operation: "write", errno: code)
        }
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
