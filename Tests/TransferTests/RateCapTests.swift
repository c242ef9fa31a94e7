// The read size the bandwidth cap asks libcurl for. The rate itself is measured end to end
// (SpeechCLITests.MaxRateTests), not here; its units are ByteUnitsTests'.
import Foundation
@testable import Transfer
import XCTest

final class RateCapTests: XCTestCase {
    func testReadSizeIsASixteenthOfTheCapWithinLibcurlsBounds() {
        XCTAssertEqual(RateCap(bytesPerSecond: 2 << 20).readSize, 128 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 1 << 30).readSize, 256 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 4 << 10).readSize, 1 << 10)
        XCTAssertEqual(RateCap(bytesPerSecond: 1).bytesPerSecond, RateCap.minimum, "a cap below 1 KiB/s is raised to it")
    }
}
