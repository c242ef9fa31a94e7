// Sizes and rates as curl's --limit-rate and aria2's --max-download-limit write them.
import ByteUnits
import XCTest

final class ByteRateTests: XCTestCase {
    func testByteRateReadsThePeersUnitsBase1024() {
        XCTAssertEqual(ByteRate.parse("20M"), 20 << 20)
        XCTAssertEqual(ByteRate.parse("20m"), 20 << 20)
        XCTAssertEqual(ByteRate.parse("500K"), 500 << 10)
        XCTAssertEqual(ByteRate.parse("500k"), 500 << 10)
        XCTAssertEqual(ByteRate.parse("1G"), 1 << 30)
        XCTAssertEqual(ByteRate.parse("1.5M"), 3 << 19)
        XCTAssertEqual(ByteRate.parse("65536"), 65536)
        XCTAssertEqual(ByteRate.parse(" 2M "), 2 << 20)
    }

    func testByteRateRefusesWhatIsNotARate() {
        for bad in ["", "M", "20MB", "2M/s", "fast", "-5M", "0", "0.4", "1.5.0M", ".5M", "5.M", "1e9", "٣M", "inf", "nan"] {
            XCTAssertNil(ByteRate.parse(bad), "'\(bad)' is not a rate")
        }
    }
}
