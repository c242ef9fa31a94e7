// The one seeded generator: SplitMix64's reference words, and its bulk form giving the same
// words as the one-at-a-time form.
import TestHub
import XCTest

final class SplitMix64Tests: XCTestCase {
    func testTheWordsAreSplitMix64sReferenceWords() {
        // Vigna's splitmix64.c from x = 1234567.
        var generator = SplitMix64(seed: 1_234_567)
        XCTAssertEqual((0..<5).map { _ in generator.next() },
                       [6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423,
                        4_593_380_528_125_082_431, 16_408_922_859_458_223_821])
    }

    func testFillAndBytesGiveTheWordsNextGivesLittleEndian() {
        var one = SplitMix64(seed: 42)
        let expected = (0..<1000).map { _ in one.next() }
        var bulk = SplitMix64(seed: 42)
        var words = [UInt64](repeating: 0, count: 600)
        words.withUnsafeMutableBufferPointer { bulk.fill($0) }
        XCTAssertEqual(words.map { UInt64(littleEndian: $0) }, Array(expected[0..<600]))
        XCTAssertEqual(bulk.next(), expected[600], "the bulk form leaves the generator where it stopped")
        let bytes = bulk.bytes(8 * 399 - 3)
        let wanted = expected[601...].flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (8 * $0)) } }
        XCTAssertEqual(bytes, Array(wanted.prefix(8 * 399 - 3)))
    }
}
