// A staging file's record on its own, with real files: the saved hash state round trip through
// the sidecar, which sidecars a resume trusts (done ranges, heads of ranges by boot), and the
// repair's window after a mismatch.
import Digest
import Foundation
import HubTypes
import ModelCache
@testable import TestSupport
import XCTest

final class StagingFileTests: ScratchDirectoryTestCase {
    private var directory: ModelDirectory!
    private let rangeSize: Int64 = 64 << 10
    private let commit = String(repeating: "c", count: 40)

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = ModelDirectory(scratch.appendingPathComponent("model"))
    }

    /// `ranges` ranges of bytes that differ from range to range, and the LFS file they make.
    private func content(ranges: Int) -> (data: Data, file: RepoFile) {
        var data = Data(count: Int(rangeSize) * ranges)
        for i in 0..<data.count { data[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i / 4099) }
        let sha = SHA256.hex(of: data)
        return (data, RepoFile(path: "model.safetensors", size: Int64(data.count), blobID: String(repeating: "b", count: 40), sha256: sha))
    }

    private func open(_ file: RepoFile, commit: String? = nil) throws -> StagingFile {
        try StagingFile(file: file, in: directory, commit: commit ?? self.commit, rangeSize: rangeSize)
    }

    private func write(_ data: Data, range index: Int, of staging: StagingFile) throws {
        let r = staging.range(index)
        try data[Int(r.start)...Int(r.end)].withUnsafeBytes { try staging.write($0, at: r.start) }
    }

    private func sidecar(_ file: RepoFile) throws -> Sidecar {
        let found = try XCTUnwrap(Sidecar.look(file.path, in: directory).value)
        return try XCTUnwrap(found, "the sidecar decodes")
    }

    /// The hash of the contiguous done bytes is saved in the sidecar and restored on the next
    /// open: those bytes are never read again. Proof: after the record, the staged bytes of the
    /// hashed ranges are overwritten, and the file still verifies from the saved state.
    /// A file of four ranges staged as a download left it: ranges 0 and 1 written and done (and
    /// hashed, with `hashing`), the record persisted and the staging file closed.
    private func stageTwoOfFourRanges(hashing: Bool) throws -> (data: Data, file: RepoFile) {
        let (data, file) = content(ranges: 4)
        let staging = try open(file)
        for i in 0..<2 { try write(data, range: i, of: staging); staging.markDone(i) }
        if hashing { try staging.advanceHash() }
        try staging.persist()
        return (data, file)
    }

    func testTheSavedHashStateRoundTripsThroughTheSidecar() throws {
        let (data, file) = try stageTwoOfFourRanges(hashing: true)
        let record = try sidecar(file)
        XCTAssertEqual(record.hashedBytes, 2 * rangeSize)
        let state = try XCTUnwrap(record.hashState.flatMap { Data(base64Encoded: $0) })
        XCTAssertEqual(SHA256(savedState: state)?.count, 2 * rangeSize, "the saved state covers the hashed bytes")

        let handle = try FileHandle(forWritingTo: directory.stagingDirectory.appendingPathComponent(ModelLayout.stagingName(file.path)))
        try handle.write(contentsOf: Data(repeating: 0xEE, count: Int(2 * rangeSize)))
        try handle.close()

        let reopened = try open(file)
        XCTAssertEqual(reopened.doneRanges, [0, 1])
        for i in 2..<4 { try write(data, range: i, of: reopened); reopened.markDone(i) }
        XCTAssertNoThrow(try reopened.finalize(), "the restored state, not the overwritten bytes, hashed ranges 0 and 1")
        XCTAssertEqual(try Data(contentsOf: directory.finalURL(file.path)).suffix(Int(2 * rangeSize)), data.suffix(Int(2 * rangeSize)))
    }

    /// A saved state that does not cover the recorded bytes is dropped: the hash starts again
    /// from byte 0 and the file still verifies.
    func testASavedStateThatDoesNotMatchItsCountIsDropped() throws {
        let (data, file) = content(ranges: 3)
        do {
            let staging = try open(file)
            try write(data, range: 0, of: staging)
            staging.markDone(0)
            try staging.advanceHash()
            try staging.persist()
        }
        var record = try sidecar(file)
        record.hashedBytes = 2 * rangeSize  // more than the state holds
        try JSONEncoder().encode(record).write(to: StagingFile.sidecarURL(file.path, in: directory))
        let reopened = try open(file)
        for i in 1..<3 { try write(data, range: i, of: reopened); reopened.markDone(i) }
        try reopened.persist()
        XCTAssertEqual(try sidecar(file).hashedBytes, 0, "the hash restarts from the first byte")
        XCTAssertNoThrow(try reopened.finalize())
    }

    /// A sidecar of the same transfer keeps its done ranges; one of another commit is discarded
    /// with the staged bytes it describes.
    func testResumeKeepsDoneRangesOnlyOfAMatchingSidecar() throws {
        let (_, file) = try stageTwoOfFourRanges(hashing: false)
        XCTAssertEqual(try open(file).doneRanges, [0, 1], "same commit: ranges 0 and 1 are not fetched again")
        let other = try open(file, commit: String(repeating: "d", count: 40))
        XCTAssertEqual(other.doneRanges, [], "another commit's record says nothing about these bytes")
        XCTAssertEqual(try sidecar(file).commit, String(repeating: "d", count: 40), "the old record is replaced")
    }

    /// A range's recorded head (`partial`) is kept when it was synced (no `partialBoot`) or
    /// recorded in this boot; another boot's unsynced head is ignored (after a power loss those
    /// bytes may be garbage).
    func testResumeKeepsPartialRangesOnlyFromThisBootOrSynced() throws {
        let (data, file) = content(ranges: 4)
        let thisBoot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let kept: Int64 = 10_000
        for (boot, trusted) in [(nil, true), (thisBoot, true), ("00000000-0000-0000-0000-000000000000", false)] as [(String?, Bool)] {
            do {
                let staging = try open(file)
                try write(data, range: 0, of: staging)
                staging.markDone(0)
                try staging.persist()
            }
            var record = try sidecar(file)
            record.partial = [PartialRange(index: 1, bytes: kept)]
            record.partialBoot = boot
            try JSONEncoder().encode(record).write(to: StagingFile.sidecarURL(file.path, in: directory))
            let reopened = try open(file)
            XCTAssertEqual(reopened.doneRanges, [0], "boot \(boot ?? "none")")
            XCTAssertEqual(reopened.partialBytes(1), trusted ? kept : 0, "boot \(boot ?? "none")")
            reopened.discard()
        }
    }

    /// After a mismatch, ranges are fetched again `repairWindow` at a time (one per 16 ranges of
    /// the file, 1 to 4), in file order; one that compared equal makes room for the next.
    func testAMismatchOpensTheRepairWindowInFileOrder() throws {
        XCTAssertEqual(try open(content(ranges: 8).file).repairWindow, 1)
        try open(content(ranges: 8).file).discard()
        let (data, file) = content(ranges: 40)
        let staging = try open(file)
        XCTAssertEqual(staging.repairWindow, 2)
        var corrupt = data
        corrupt[Int(rangeSize) * 7 + 5] ^= 0xFF
        for i in 0..<40 { try write(corrupt, range: i, of: staging); staging.markDone(i) }
        XCTAssertThrowsError(try staging.finalize()) { error in
            guard case CacheError.repairing(_, let ranges) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(ranges, [0, 1], "the first two ranges, the window")
        }
        XCTAssertTrue(staging.isRepairing)
        XCTAssertEqual(try sidecar(file).repair?.digest, SHA256.hex(of: corrupt), "the record names what the bytes hash to")
        XCTAssertEqual(staging.markRepaired(0, changed: false), [2], "range 0 compared equal: the next one opens")
        XCTAssertEqual(staging.markRepaired(1, changed: true), [], "bytes changed: the file is checked before looking further")
    }
}
