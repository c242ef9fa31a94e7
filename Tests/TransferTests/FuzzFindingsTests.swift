// Inputs the fuzz targets (Fuzzing/, scripts/fuzz) found breaking a parser's invariant, each
// kept as a plain test of the parser's answer.
import Foundation
import HubClient
import Spool
import Transfer
import XCTest

final class FuzzFindingsTests: XCTestCase {
    /// Content-Range is only taken when it names a real range of the file: start <= end < total,
    /// plain digits. Found: `bytes 131072-197607/196708` (end past the total) was accepted.
    func testContentRangeOutsideTheFileIsRefused() {
        for header in ["bytes 131072-197607/196708", "bytes 5-3/10", "bytes 0-10/10", "bytes +0-9/10",
                       "bytes 0-+9/10", "bytes 0-9/abc", "bytes 0-9/", "bytes  0-9/10", "bytes 0--9/10"] {
            XCTAssertNil(RangeResponse.parseContentRange(header), header)
        }
        XCTAssertEqual(RangeResponse.parseContentRange("bytes 131072-196707/196708").map { [$0.start, $0.end, $0.total] },
                       [131072, 196707, 196708])
        XCTAssertEqual(RangeResponse.parseContentRange("Bytes 0-0/*").map { [$0.start, $0.end] }, [0, 0])
        XCTAssertNil(RangeResponse.parseContentRange("bytes 0-0/*")?.total)
    }

    /// A job name parses only when it is the name `jobName` writes for its index. Found:
    /// `<key>.0000017` parsed as range 17, whose part the splicer looks for as `<key>.000017.part`.
    func testJobNameWithExtraLeadingZeroIsRefused() {
        let key = "3f2a9c0b1d4e5f60718293a4"
        XCTAssertNil(PlannedFile.parseJob("\(key).0000017"))
        XCTAssertNil(PlannedFile.parseJob("\(key).000000000"))
        XCTAssertEqual(PlannedFile.parseJob("\(key).000017")?.index, 17)
        XCTAssertEqual(PlannedFile.parseJob("\(key).1000000")?.index, 1_000_000)
    }
}
