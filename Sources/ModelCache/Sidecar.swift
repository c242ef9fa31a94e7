// Sidecar - the record of a staging file's progress (`ModelLayout.sidecarName`), and the rules of
// which record a resume may trust: its transfer (`resumable`) and its ranges' heads by boot
// (`trustHeads`).
import Foundation
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
    /// A file fetched through Xet: the terms already written and synced, with their chunk
    /// hashes (XetStagingRecord.swift). Absent for files fetched plainly and in older sidecars.
    public var xet: XetStagingRecord?
    /// A random tag of this staging file, given when the sidecar is first written with it: a
    /// worker that writes a range straight into the staging file records the range under this
    /// name and the file's inode (StagedRangeRecord), so a record for a staging file that was
    /// since started over is never trusted. Absent in older sidecars (their ranges come as parts).
    public var stagingTag: String?

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

extension Sidecar {
    /// `found` (the sidecar on disk) when a resume of the transfer `asked` describes may use it:
    /// the same file, size, commit and etag, in a range size a resume can split by. Another host
    /// may split files differently (its own HF_DOWNLOAD_RANGE_CHUNK): its ranges are kept, in its
    /// range size, rather than thrown away. Nil: the staged bytes cannot be trusted.
    static func resumable(_ found: Sidecar, asked: Sidecar) -> Sidecar? {
        var sameButRanges = asked
        sameButRanges.rangeSize = found.rangeSize
        guard found.rangeSize > 0, found.rangeSize % (64 << 10) == 0 || found.rangeSize == asked.size,
              found.matches(sameButRanges) else { return nil }
        return found
    }

    /// Keeps of the recorded ranges what this boot may trust, for a file of `rangeCount` ranges
    /// and `size` bytes (`boot`: this boot's id). Heads recorded without a sync (`partialBoot`)
    /// count only in the boot that wrote them: after a power loss those bytes may be garbage. A
    /// head as long as its range is a range a killed process finished but had not yet recorded
    /// after a sync (`persist`): done here, though not durable until the next sync. Returns the
    /// done ranges that were recorded after a sync.
    mutating func trustHeads(rangeCount count: Int, size: Int64, boot: String?) -> [Int] {
        done = done.filter { $0 >= 0 && $0 < count }
        let doneSet = Set(done)
        let ranges = rangeSize
        let trusted = partialBoot == nil || partialBoot == boot
        let finished = trusted ? Set((partial ?? []).filter { p in
            p.index >= 0 && p.index < count && !doneSet.contains(p.index)
                && p.bytes == min(size, Int64(p.index + 1) * ranges) - Int64(p.index) * ranges
        }.map(\.index)) : []
        let synced = done.sorted()
        done += finished.sorted()
        partial = trusted ? partial?.filter { p in
            p.index >= 0 && p.index < count && !doneSet.contains(p.index) && p.bytes > 0
                && p.bytes < min(size, Int64(p.index + 1) * ranges) - Int64(p.index) * ranges
        } : nil
        if partial?.isEmpty == true { partial = nil }
        partialBoot = nil
        return synced
    }
}
