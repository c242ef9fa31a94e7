// The spool's names: every name SpoolLayout writes is read back by its parser, and names the
// spool never writes are not taken for claims, temp files, parts or records.
import Foundation
import Spool
import XCTest

final class SpoolLayoutTests: XCTestCase {
    let layout = SpoolLayout(base: "/cache")
    let job = String(repeating: "ab", count: 12) + ".000017"

    /// A job's name is its key, a dot and the index in at least six digits, and parses back;
    /// names that differ from that spelling (padding, sign, length) are not jobs.
    func testJobNamesAreKeyDotSixDigitIndexAndParseBack() throws {
        let key = String(repeating: "ab", count: 12)
        for (index, name) in [(0, ".000000"), (17, ".000017"), (123_456, ".123456"), (1_234_567, ".1234567")] {
            XCTAssertEqual(PlannedFile.jobName(key: key, index: index), key + name)
            let parsed = try XCTUnwrap(PlannedFile.parseJob(key + name), "\(key + name) did not parse")
            XCTAssertEqual(parsed.key, key)
            XCTAssertEqual(parsed.index, index)
        }
        for junk in [".00017", ".0000017", ".-00017", ".00001x", "", "."] {
            XCTAssertNil(PlannedFile.parseJob(key + junk), "\(key + junk) parsed as a job")
        }
    }

    func testEveryFolderLivesUnderTheSpool() {
        XCTAssertEqual(layout.root, "/cache/spool")
        XCTAssertEqual(layout.path(.claimed), "/cache/spool/jobs/claimed")
        XCTAssertEqual(Set(SpoolLayout.Folder.allCases.map { layout.path($0) }).count, SpoolLayout.Folder.allCases.count)
    }

    func testAClaimNameReadsBackAsItsJobAndHolder() throws {
        let entry = (layout.claim(job, by: .init(node: "node-1", pid: 4242)) as NSString).lastPathComponent
        XCTAssertEqual(entry, "\(job)@node-1@4242")
        let claim = try XCTUnwrap(SpoolLayout.Claim(entry))
        XCTAssertEqual(claim.job, job)
        XCTAssertEqual(claim.holder.node, "node-1")
        XCTAssertEqual(claim.holder.pid, 4242)
        XCTAssertEqual(claim.range?.index, 17)
        XCTAssertTrue(claim.isWorkers)
        XCTAssertEqual(SpoolLayout.claimedJob(entry), job)
    }

    func testJunkClaimNamesNameNoWorker() {
        for junk in ["junk@node@1", "\(job)@@3", "\(job)@node@0"] {
            XCTAssertFalse(SpoolLayout.Claim(junk)?.isWorkers ?? false, junk)
        }
        for junk in [job, "\(job)@node", "\(job)@node@x", "\(job)@a@b@1"] {
            XCTAssertNil(SpoolLayout.Claim(junk), junk)
        }
        XCTAssertNil(SpoolLayout.claimedJob(job), "a name without a holder claims nothing")
    }

    func testPartAndRecordNamesReadBack() {
        XCTAssertEqual(SpoolLayout.partJob((layout.part(job) as NSString).lastPathComponent), job)
        XCTAssertEqual(SpoolLayout.recordID((layout.request("r1") as NSString).lastPathComponent), "r1")
        XCTAssertEqual(SpoolLayout.recordID((layout.failure("k1") as NSString).lastPathComponent), "k1")
        XCTAssertNil(SpoolLayout.partJob(job))
        XCTAssertNil(SpoolLayout.recordID("r1.json.tmp"))
    }
}
