// The bandwidth cap's units, as curl's --limit-rate and aria2's --max-download-limit write them,
// and the read size it asks libcurl for. The rate itself is measured end to end
// (SpeechCLITests.MaxRateTests), not here.
import Foundation
@testable import Transfer
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

    func testReadSizeIsASixteenthOfTheCapWithinLibcurlsBounds() {
        XCTAssertEqual(RateCap(bytesPerSecond: 2 << 20).readSize, 128 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 1 << 30).readSize, 256 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 4 << 10).readSize, 1 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 1).bytesPerSecond, RateCap.minimum, "a cap below 1 KiB/s is raised to it")
    }
}
