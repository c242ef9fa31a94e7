// RangeWriter - the one place where a response's body becomes bytes on disk, for the embedded
// engine (into the staging file) and a worker (into its part file) alike.
//
// It judges the status line and headers before any byte (a 206 must match the asked range, a
// 200 only counts as the whole file from byte 0, every range carries the file's pinned ETag),
// writes each chunk with pwrite at its offset, and never writes past the range's end.
import Curl
import Foundation
import ModelCache
import SharedFiles

/// Where a range's bytes go: an offset in the file's own numbering.
protocol RangeSink: AnyObject {
    func write(_ bytes: UnsafeRawBufferPointer, at fileOffset: Int64) throws
}

extension StagingFile: RangeSink {}

/// A worker's part file: holds exactly one range, so file offset `origin` is its byte 0. Or,
/// written in place (`staging`: the staging file's descriptor), the bytes go straight into the
/// staging file at their own offsets and the part file holds none: it is an empty progress record
/// whose length is the range's prefix written so far (docs/protocol.md, "fetch").
///
/// Its bytes are gathered into writes of `bufferSize` (or the range's last bytes): a socket
/// hands over whatever has arrived, often a few KiB under load, and on a network filesystem
/// each write(2) is an operation at the file server (a FUSE client sends at most 128 KiB per
/// write). What the file holds (or records) stays a prefix of the range, at most a second behind
/// what arrived (`flushIfStale`: other nodes judge a stalled holder by its part's size), so a part
/// left by a killed worker is adopted as before, only up to 256 KiB shorter. A progress record is
/// never longer than the bytes written, and is set at most once a second (each is a metadata
/// operation at the file server) and when the range ends.
final class PartFile: RangeSink {
    let path: String
    let fd: Int32
    let origin: Int64
    /// Where the bytes go, and the file offset of its byte 0: the part itself, or the staging file.
    private let data: Int32
    private let dataOrigin: Int64
    private let inPlace: Bool
    static let bufferSize = 256 << 10
    private var buffer: UnsafeMutableRawBufferPointer
    private var buffered = 0
    /// The file offset of the buffer's first byte.
    private var bufferStart: Int64 = 0
    /// When the buffer was last written out (CLOCK_MONOTONIC, seconds).
    private var flushedAt = MonotonicClock.seconds()
    /// The most the file lags behind what arrived.
    static let staleAfter = 1.0
    /// In place: bytes of the range written in order from its start, and what the record says.
    private(set) var held: Int64
    private var recorded: Int64
    private var recordedAt = MonotonicClock.seconds()

    /// Creates (or truncates) the part file at `path` for a range starting at `origin`; with
    /// `keep`, opens an adopted part as it is (its bytes, or with `staging` the bytes it records,
    /// are the range's first `held` ones).
    init(path: String, origin: Int64, keep: Bool = false, staging: Int32? = nil, held: Int64 = 0) throws {
        fd = SharedFS.retry { open(path, O_WRONLY | O_CREAT | (keep ? 0 : O_TRUNC) | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw CacheError.io(path: path, operation: "create part", errno: errno) }
        self.path = path
        self.origin = origin
        data = staging ?? fd
        dataOrigin = staging == nil ? origin : 0
        inPlace = staging != nil
        self.held = keep ? held : 0
        recorded = self.held
        buffer = .allocate(byteCount: PartFile.bufferSize, alignment: 64)
    }

    deinit {
        try? finish()  // what arrived stays for whoever adopts the part
        buffer.deallocate()
        close(fd)  // never the staging file's descriptor: its owner syncs and closes it
    }

    func write(_ bytes: UnsafeRawBufferPointer, at fileOffset: Int64) throws {
        if let failure { throw CacheError.io(path: path, operation: "write", errno: failure) }
        var bytes = bytes
        var offset = fileOffset
        if buffered > 0 && offset != bufferStart + Int64(buffered) { try flush() }
        while !bytes.isEmpty {
            if buffered == 0 { bufferStart = offset }
            let take = min(bytes.count, buffer.count - buffered)
            UnsafeMutableRawBufferPointer(rebasing: buffer[buffered..<(buffered + take)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<take]))
            buffered += take
            offset += Int64(take)
            bytes = UnsafeRawBufferPointer(rebasing: bytes[take...])
            if buffered == buffer.count { try flush() }
        }
        try flushIfStale()
    }

    /// Writes the buffer out when it was last written more than `staleAfter` ago (called as
    /// bytes arrive, and on the transfer's ticks while none do).
    func flushIfStale() throws {
        if buffered > 0 && MonotonicClock.seconds() - flushedAt >= PartFile.staleAfter { try flush() }
        if inPlace && recorded != held && MonotonicClock.seconds() - recordedAt >= PartFile.staleAfter { try recordProgress() }
    }

    /// Writes what the buffer holds. A failed write is kept: this and every later write, flush
    /// and sync throw it (the range is given up), so no later byte lands past bytes that never
    /// did (a part with a hole of zeros, published as whole).
    func flush() throws {
        if let failure { throw CacheError.io(path: path, operation: "write", errno: failure) }
        flushedAt = MonotonicClock.seconds()
        guard buffered > 0 else { return }
        if let code = FileIO.writeAll(data, UnsafeRawBufferPointer(rebasing: buffer[0..<buffered]), at: bufferStart - dataOrigin) {
            failure = code
            throw CacheError.io(path: path, operation: "write", errno: code)
        }
        // The prefix grows only by bytes that continue it (a range is written in order).
        if bufferStart - origin <= held { held = max(held, bufferStart + Int64(buffered) - origin) }
        buffered = 0
    }

    /// Flushes, and in place records the whole prefix written (the range's end, or where it stopped).
    func finish() throws {
        try flush()
        if inPlace && recorded != held { try recordProgress() }
    }

    /// Sets the progress record's length to the prefix written: after the bytes, never ahead.
    private func recordProgress() throws {
        recordedAt = MonotonicClock.seconds()
        guard ftruncate(fd, off_t(held)) == 0 else { throw CacheError.io(path: path, operation: "record the progress of", errno: errno) }
        recorded = held
    }

    /// The errno of a write that failed (then nothing more is written).
    private var failure: Int32?

    func sync() throws {
        try finish()
        guard (inPlace ? fdatasync(data) : fsync(fd)) == 0 else { throw CacheError.io(path: path, operation: "sync", errno: errno) }
    }
}

/// A range of a file under repair (StagingRepair.swift): its bytes are compared with the staged
/// ones and written only where they differ; `changed` says whether any did.
final class RepairSink: RangeSink {
    let staging: StagingFile
    private(set) var changed = false

    init(_ staging: StagingFile) { self.staging = staging }

    func write(_ bytes: UnsafeRawBufferPointer, at fileOffset: Int64) throws {
        if try staging.writeComparing(bytes, at: fileOffset) { changed = true }
    }
}

/// The ETag every range of one file must carry: the first range's, unless known before.
final class EtagPin: @unchecked Sendable {
    private let lock = NSLock()
    private var pinned: String?

    init(_ etag: String? = nil) { pinned = etag }

    /// Nil when `etag` agrees with the pin (or either is unknown); otherwise why it does not.
    func check(_ etag: String?) -> String? {
        guard let etag else { return nil }
        return lock.withLock {
            if let pinned, pinned != etag { return "ETag changed from \(pinned) to \(etag)" }
            pinned = etag
            return nil
        }
    }
}

/// Bytes `start...end` of one file on their way to a sink, across however many attempts.
final class RangeWriter {
    let start: Int64
    let end: Int64
    let fileSize: Int64
    private let sink: RangeSink
    private let pin: EtagPin
    /// Bytes of the range on disk: always the prefix `start ..< start + written`.
    private(set) var written: Int64 = 0
    /// Why the current attempt was stopped by a check here (nil: it was not).
    private(set) var refusal: RangeRefusal?
    /// Called with the count of each chunk written (progress, lease refresh).
    var onWritten: (Int64) -> Void = { _ in }

    /// - Parameter alreadyWritten: bytes from `start` already on disk (a resumed range): the
    ///   first attempt asks for the rest.
    init(start: Int64, end: Int64, fileSize: Int64, into sink: RangeSink, pin: EtagPin, alreadyWritten: Int64 = 0) {
        self.start = start
        self.end = end
        self.fileSize = fileSize
        self.sink = sink
        self.pin = pin
        written = min(max(0, alreadyWritten), end - start + 1)
    }

    var length: Int64 { end - start + 1 }
    /// The first byte not yet on disk: where a retry resumes.
    var next: Int64 { start + written }
    var isComplete: Bool { written == length }

    /// A new attempt: forget the last one's refusal.
    func beginAttempt() { refusal = nil }

    /// Judges an answer to a GET of `next...end` (`ranged`: a Range header was sent) before any
    /// body byte: stream it here, keep its small error body, or stop it (with `refusal` set).
    func accept(status: Int, headers: HTTPHeaders, url: String, ranged: Bool, isHubOrigin: Bool) -> BodyDisposition {
        switch RangeResponse.verdict(status: status, headers: headers, url: url, from: next, end: end, size: fileSize,
                                     ranged: ranged, isHubOrigin: isHubOrigin) {
        case .stream(let etag):
            if let changed = pin.check(etag) {
                refusal = .changedOnServer(changed)
                return .abort
            }
            return .stream
        case .refuse(let why):
            refusal = why
            return .abort
        case .errorBody:
            return .collect(limit: BodyLimit.errorPage)
        }
    }

    /// Writes one chunk at its offset; false (with `refusal` set) stops the attempt: a failed
    /// write, or bytes past the range's end (only the part inside the range is written).
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let take = Int(min(Int64(bytes.count), max(0, length - written)))
        if take > 0 {
            do {
                try sink.write(UnsafeRawBufferPointer(rebasing: bytes[0..<take]), at: next)
            } catch {
                refusal = .write(error)
                return false
            }
            written += Int64(take)
            onWritten(Int64(take))
        }
        if take < bytes.count {
            refusal = .overflow
            return false
        }
        return true
    }
}
