// RangeJob - one byte range of one file to fetch in the embedded engine, and the file task it belongs to.
import Foundation
import HubTypes
import ModelCache
import SharedFiles

/// A file being transferred: its staging file, where its bytes come from, and what is left.
final class FileTask: @unchecked Sendable {
    let file: RepoFile
    let staging: StagingFile
    /// Ranged transfer (large file) rather than one stream.
    let ranged: Bool
    /// The URL ranges are fetched from (the CDN location for large files, the resolve URL otherwise).
    var url: String
    /// The server ignored Range: the file restarted as one stream.
    var wholeFallback = false
    /// The ETag the first range came with; every later range must carry the same.
    let pin = EtagPin()
    /// Ranges not yet done.
    var pending: Int
    /// Bytes credited to progress for this file.
    var countedBytes: Int64 = 0
    /// `countedBytes` and the time when this file's ranges in flight were last noted.
    var notedBytes: Int64 = 0
    var notedAt = MonotonicClock.seconds()
    var finalizing = false
    /// A range of this file failed without a byte: its other ranges wait (those never tried
    /// do not start) until one of its ranges gets bytes again, so a file that cannot be had
    /// fails after one range's retries instead of cycling every range through its first attempt.
    var probing = false
    var dirty = false
    var syncScheduled = false
    /// Serial queue for this file's hashing and finalization.
    let queue: DispatchQueue
    /// Serial queue for this file's syncs and sidecar writes: an fdatasync can block for a
    /// while under heavy writeback, and the hash must not wait behind it (else a long tail of
    /// bytes is left to hash after the last range arrives).
    let syncQueue: DispatchQueue

    init(file: RepoFile, staging: StagingFile, ranged: Bool, url: String) {
        self.file = file
        self.staging = staging
        self.ranged = ranged
        self.url = url
        let done = staging.doneRanges
        pending = staging.rangeCount - done.count
        countedBytes = done.reduce(0) { sum, i in let r = staging.range(i); return sum + r.end - r.start + 1 }
        notedBytes = countedBytes
        queue = DispatchQueue(label: "speech-fetch.file.\(file.path)")
        syncQueue = DispatchQueue(label: "speech-fetch.sync.\(file.path)")
    }
}

/// One request's worth of work: a range of a file (`index == nil` for the whole file).
final class RangeJob {
    let task: FileTask
    let index: Int?
    let writer: RangeWriter
    /// Set for a range of a file under repair: its bytes are compared, not just written.
    let repair: RepairSink?
    var count = RangeAttemptCount()
    /// Not started again before this (MonotonicClock seconds): a retry's delay.
    var notBefore = 0.0
    var url: String
    /// `writer.written` when the current attempt began: an attempt that ends with no more got nothing.
    var writtenAtAttempt: Int64 = 0
    /// `writer.written` when its head was last recorded in the staging file's record.
    var noted: Int64 = 0

    init(task: FileTask, index: Int?, start: Int64, end: Int64) {
        self.task = task
        self.index = index
        let repair = index != nil && task.staging.isRepairing ? RepairSink(task.staging) : nil
        self.repair = repair
        self.writer = RangeWriter(start: start, end: end, fileSize: task.file.size, into: repair ?? task.staging, pin: task.pin)
        self.url = task.url
    }

    /// A Range header is sent for ranged files and for any resume.
    var sendsRange: Bool { (task.ranged && !task.wholeFallback) || writer.written > 0 }
}
