// Ranges written straight into the staging file by speech-fetchd's workers (docs/protocol.md,
// "fetch", "adopt"), with real processes, a real SIGKILL and real files: a worker killed mid-range
// leaves its bytes in the staging file and a progress record of how many, which the next claimant
// on this node resumes from; another node's progress record is never adopted (its bytes were not
// synced when its length was set), so that range is fetched whole.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import Spool
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class InPlaceRangeTests: DaemonTestCase {
    let repo = "org/InPlace"
    let path = "model.safetensors"
    var file: String { "\(repo)/\(path)" }
    var base: String { cacheBase.path }

    func testAWorkerKilledMidRangeLeavesItsBytesInPlaceAndTheNextClaimantResumesAfterThem() throws {
        let size = 2 << 20
        let bigRange = 1 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        let bytes = try source(repo, path)
        hub.setFault(.rateLimit(bytesPerSecond: 256 << 10), for: file)  // 4 s per range
        let extra = ["HF_DOWNLOAD_RANGE_CHUNK": "\(bigRange)"]
        let daemon = try startDaemon(workers: 1, extra: extra)
        let workers = Set(descendants(of: daemon.process.processIdentifier))
        let client = try speech(["download", repo, "--cache-base", base], extra: extra, hint: "download")
        guard let (victim, job) = firstClaim(by: workers), let index = PlannedFile.parseJob(job)?.index else {
            return XCTFail("no worker claimed a job; daemon log:\n\(contents(daemon.log))")
        }
        let (record, held) = waitForProgressRecord(of: job, by: victim, holding: bigRange / 4)
        XCTAssertEqual(kill(victim, SIGKILL), 0)
        XCTAssertGreaterThanOrEqual(held, bigRange / 4, "the worker wrote part of its range before it was killed")
        XCTAssertTrue(record.hasPrefix("part-\(job)~"), "the range is written in place; its part is a progress record: \(record)")

        // What the killed worker left: its range's first `held` bytes in the staging file (its
        // record is never ahead of them), and the range not recorded done.
        let staging = modelDir(repo).appendingPathComponent(".incomplete/\(ModelLayout.stagingName(path))")
        let staged = try Data(contentsOf: staging)
        let start = index * bigRange
        XCTAssertEqual(staged.subdata(in: start..<(start + held)), bytes.subdata(in: start..<(start + held)),
                       "the bytes the record counts are in the staging file")
        XCTAssertFalse(sidecar(repo, path)?.done.contains(index) ?? true, "the range is not recorded done")
        hub.clearFaults()

        XCTAssertTrue(waitForExit(client.process, timeout: 40), "the download finished: \(contents(client.stderr))")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
        let range = start ..< min(size, start + bigRange)
        let bodies = hub.servedRanges(for: file).filter { $0.overlaps(range) }
        XCTAssertEqual(bodies.count, 2, "the range was asked for twice: \(bodies)")
        if let resumed = bodies.last {
            XCTAssertGreaterThanOrEqual(resumed.lowerBound, start + held, "the next claimant resumed after the bytes in place")
            XCTAssertEqual(resumed.upperBound, range.upperBound)
        }
        XCTAssertTrue(contents(daemon.log).contains("adopted"), "the record was adopted:\n\(contents(daemon.log))")
    }

    func testAnotherNodesProgressRecordIsNotAdoptedAndItsRangeIsFetchedWhole() throws {
        let size = 1 << 20  // 4 ranges of 256 KiB
        let rangeSize = 256 << 10
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        let (spool, plan) = try planByHand(repo, path, rangeSize: rangeSize)
        let tag = try XCTUnwrap(sidecar(repo, path)?.stagingTag, "the planner's sidecar tags the staging file")
        // node9 wrote half of range 1 in place and set its record's length, then died: its bytes
        // were never synced, so they may be anything after its machine went down.
        let record = spool.layout.path(.tmp, "part-\(plan.jobName(1))~\(tag)@node9@4242@1")
        XCTAssertTrue(FileManager.default.createFile(atPath: record, contents: nil))
        XCTAssertEqual(truncate(record, off_t(rangeSize / 2)), 0)
        var old = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), timespec(tv_sec: time(nil) - 3600, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, record, &old, 0), 0)  // untouched for far longer than a lease

        let daemon = try startDaemon(workers: 2)
        let client = try speech(["download", repo, "--cache-base", base], hint: "download")
        XCTAssertTrue(waitForExit(client.process, timeout: 30), "the download finished: \(contents(client.stderr))")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr))
        try assertSameBytes(repo, path)
        let range = rangeSize ..< 2 * rangeSize
        XCTAssertEqual(hub.servedRanges(for: file).filter { $0.overlaps(range) }, [range], "range 1 was fetched whole, once")
        XCTAssertFalse(contents(daemon.log).contains("adopted"), "nothing was adopted:\n\(contents(daemon.log))")
    }

    /// A byte flipped on the way into a range written in place: the file does not verify, and its
    /// repair fetches the suspect ranges again as parts (compared with the staged bytes, never
    /// written in place), which heals it. The repair looks in file order, one range at a time here,
    /// so the ranges up to the bad one are fetched twice, none after it.
    func testAByteFlippedInARangeWrittenInPlaceIsRepairedByFetchingItsRangeAgain() throws {
        let size = 2 << 20  // 8 ranges of 256 KiB: a repair window of 1
        let rangeSize = 256 << 10
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        let bad = 5 * rangeSize + 1234
        hub.setFault(.flipByte(offset: bad, times: 1), for: file)
        let daemon = try startDaemon(workers: 2)
        let client = try speech(["download", repo, "--cache-base", base], hint: "download")
        XCTAssertTrue(waitForExit(client.process, timeout: 40), "the download finished: \(contents(client.stderr))")
        XCTAssertEqual(client.process.terminationStatus, 0, "\(contents(client.stderr))\n\(contents(daemon.log))")
        try assertSameBytes(repo, path)
        let served = hub.bodyBytes(for: file)
        XCTAssertGreaterThan(served, size, "the bad range was fetched again")
        XCTAssertLessThanOrEqual(served, size + 6 * rangeSize, "ranges were fetched again only up to the bad one")
        let badRange = 5 * rangeSize ..< 6 * rangeSize
        XCTAssertGreaterThanOrEqual(hub.servedRanges(for: file).filter { $0.overlaps(badRange) }.count, 2)
    }
}
