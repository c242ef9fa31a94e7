// ByteFormat, DurationText and RateMeter: the one formatting of sizes, rates and spans of time,
// and the one measure of a rate and the time left.
import ByteUnits
import XCTest

final class ByteFormatTests: XCTestCase {
    func testSizesAndRatesAreWrittenInOneStyle() {
        XCTAssertEqual(ByteFormat.string(512), "512 B")
        XCTAssertEqual(ByteFormat.string(1536), "1.5 KiB")
        XCTAssertEqual(ByteFormat.string(3 << 30), "3.0 GiB")
        XCTAssertEqual(ByteFormat.withExactBytes(512), "512 bytes")
        XCTAssertEqual(ByteFormat.withExactBytes(12_897_484), "12.3 MiB (12897484 bytes)")
        XCTAssertEqual(ByteFormat.rate(2 << 20), "2.0 MiB/s")
        XCTAssertEqual(ByteFormat.rate(100), "100 B/s")
        XCTAssertEqual(ByteFormat.mebibytes(3 << 20), "3.0 MiB")
        XCTAssertEqual(ByteFormat.mebibytes(512 << 10), "0.5 MiB", "the log's one unit")
    }

    func testDurationsAreCompactForAnEstimateAndCoarseForAnAge() {
        XCTAssertEqual(DurationText.compact(45), "45s")
        XCTAssertEqual(DurationText.compact(200), "3m20s")
        XCTAssertEqual(DurationText.compact(7500), "2h5m")
        XCTAssertEqual(DurationText.compact(-1), "--")
        XCTAssertEqual(DurationText.compact(.infinity), "--")
        XCTAssertEqual(DurationText.coarse(45), "45 s")
        XCTAssertEqual(DurationText.coarse(720), "12 min")
        XCTAssertEqual(DurationText.coarse(5 * 3600), "5 h")
        XCTAssertEqual(DurationText.coarse(3 * 86400), "3 d")
    }

    func testTheRateIsMeasuredOverTheWindowAndTheTimeLeftFollowsIt() {
        var meter = RateMeter(window: 3)
        XCTAssertEqual(meter.add(0, now: 100), 0, "one sample is no rate")
        XCTAssertEqual(meter.add(1000, now: 101), 1000)
        XCTAssertEqual(meter.add(3000, now: 102), 1500)
        XCTAssertEqual(meter.add(9000, now: 105), 2000, "samples before the window go, the one just before it stays")
        XCTAssertEqual(meter.add(8000, now: 106), 1250, "never negative; a lost byte lowers it")
        XCTAssertEqual(RateMeter.eta(remaining: 3000, bytesPerSecond: 1500), 2)
        XCTAssertNil(RateMeter.eta(remaining: 3000, bytesPerSecond: 0))
    }
}
