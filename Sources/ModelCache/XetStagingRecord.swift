// XetStagingRecord - what a staging file fetched through Xet records of its progress: each term
// (a run of chunks of one xorb, at its offset in the file) whose bytes are written, with the
// chunk hashes and lengths they decoded to, so a resumed call fetches no finished term again and
// still assembles the file's Merkle root without reading the bytes back. The record is written
// by the staging file's `persist` (data synced first, then the sidecar), so it never names a
// term whose bytes a crash could lose.
import Foundation

public struct XetStagingRecord: Codable, Sendable, Equatable {
    /// The file's Xet hash (hex) the terms belong to: a record for another hash is ignored.
    public var fileHash: String
    public var terms: [XetDoneTerm]
    /// Terms being written: the chunks written from each one's first (`chunkEnd` is the first
    /// not written; `byteEnd` the last xorb byte of those written), so a resume asks only for the
    /// rest of a long term. Absent when none.
    public var heads: [XetDoneTerm]?

    public init(fileHash: String, terms: [XetDoneTerm] = [], heads: [XetDoneTerm]? = nil) {
        self.fileHash = fileHash
        self.terms = terms
        self.heads = heads
    }
}

/// One finished term: chunks `chunkStart..<chunkEnd` of xorb `xorb`, written at file offset
/// `offset`; in the xorb they are bytes `byteStart...byteEnd`; `hashes` holds their 32-byte chunk
/// hashes (base64, in order) and `lengths` their uncompressed lengths.
public struct XetDoneTerm: Codable, Sendable, Equatable {
    public var offset: Int64
    public var xorb: String
    public var chunkStart: Int
    public var chunkEnd: Int
    public var byteStart: Int
    public var byteEnd: Int
    public var hashes: String
    public var lengths: [Int]

    public init(offset: Int64, xorb: String, chunkStart: Int, chunkEnd: Int, byteStart: Int, byteEnd: Int,
                hashes: String, lengths: [Int]) {
        self.offset = offset
        self.xorb = xorb
        self.chunkStart = chunkStart
        self.chunkEnd = chunkEnd
        self.byteStart = byteStart
        self.byteEnd = byteEnd
        self.hashes = hashes
        self.lengths = lengths
    }
}

extension StagingFile {
    /// The terms a previous call finished for the file with Xet hash `fileHash` (none when the
    /// record is for another hash, or there is none); from now on the record is for this hash.
    public func xetTerms(for fileHash: String) -> [XetDoneTerm] {
        lock.withLock {
            if record.xet?.fileHash == fileHash { return record.xet?.terms ?? [] }
            record.xet = XetStagingRecord(fileHash: fileHash)
            return []
        }
    }

    /// The heads of terms a previous call was writing (see `XetStagingRecord.heads`), for the
    /// file with Xet hash `fileHash`.
    public func xetHeads(for fileHash: String) -> [XetDoneTerm] {
        lock.withLock { record.xet?.fileHash == fileHash ? record.xet?.heads ?? [] : [] }
    }

    /// Notes a finished term; it is recorded with the next `persist`, after a sync.
    public func recordXetTerm(_ term: XetDoneTerm) {
        lock.withLock {
            record.xet?.terms.append(term)
            record.xet?.heads?.removeAll { $0.offset == term.offset && $0.chunkStart == term.chunkStart && $0.xorb == term.xorb }
        }
    }

    /// Notes the heads of the terms being written (replacing those noted before); recorded with
    /// the next `persist`, after a sync, so a head never names bytes a crash could lose.
    public func recordXetHeads(_ heads: [XetDoneTerm]) {
        lock.withLock {
            guard record.xet != nil else { return }
            let finished = Set((record.xet?.terms ?? []).map { "\($0.offset) \($0.xorb) \($0.chunkStart)" })
            let kept = heads.filter { !finished.contains("\($0.offset) \($0.xorb) \($0.chunkStart)") }
            record.xet?.heads = kept.isEmpty ? nil : kept
        }
    }

    /// Forgets every finished term and head (the file is fetched again from scratch).
    public func resetXetTerms() {
        lock.withLock {
            if record.xet != nil {
                record.xet?.terms = []
                record.xet?.heads = nil
            }
        }
    }
}
