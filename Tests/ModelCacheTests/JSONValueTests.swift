// The quick JSON reader behind manifest reads: it must agree with Foundation wherever it
// answers, and refuse (nil) whatever is not JSON.
import Foundation
import HubTypes
import ModelCache
import XCTest

final class JSONValueTests: XCTestCase {
    private func parse(_ text: String) -> JSONValue? { JSONValue.parse(Data(text.utf8)) }

    func testScalarsObjectsAndArrays() {
        XCTAssertEqual(parse(#" {"a": [1, -2.5e3, true, false, null, "x"], "b": {}} "#),
                       .object(["a": .array([.number("1"), .number("-2.5e3"), .bool(true), .bool(false), .null, .string("x")]),
                                "b": .object([:])]))
        XCTAssertEqual(parse("[]"), .array([]))
        XCTAssertEqual(parse("9007199254740993")?.int64Value, 9_007_199_254_740_993)  // beyond Double's 53 bits
    }

    func testStringEscapesAgreeWithFoundation() throws {
        let samples = [#""plain""#, #""a\"b\\c\/d""#, #""\b\f\n\r\t""#, #""\u00e9\u4e2d""#, #""\u00C9\u4E2D""#,
                       #""\ud83d\ude00 ok""#, "\"d\u{00E9}j\u{00E0} vu \u{1F600}\"", #""""#]
        for sample in samples {
            let expected = try JSONSerialization.jsonObject(with: Data(sample.utf8), options: [.fragmentsAllowed]) as? String
            XCTAssertEqual(parse(sample)?.stringValue, expected, sample)
        }
    }

    func testRefusesWhatIsNotJSON() {
        let bad = ["", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "1.", "-", "1e", "tru", "nul", "\"open",
                   "\"bad \\x escape\"", "\"\\u00g9\"", "\"\\u+0e9\"", "\"\\u00\u{00E9}\"",
                   "\"\\ud83d alone\"", "\"\\ude00\"", "\"tab\tinside\"", "[1] 2", "{a:1}",
                   String(repeating: "[", count: 100) + String(repeating: "]", count: 100)]
        for text in bad { XCTAssertNil(parse(text), text) }
    }

    func testLeavesToFoundationWhatFoundationReadsDifferently() {
        // Invalid UTF-8 inside a string: refused, never repaired into U+FFFD.
        for bytes: [UInt8] in [[0x22, 0xFF, 0xFE, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0x5C, 0x6E, 0xFF, 0x22]] {
            XCTAssertNil(JSONValue.parse(Data(bytes)), "\(bytes)")
        }
        // A repeated key: JSONDecoder keeps the first value, so the quick reader declines.
        XCTAssertNil(parse(#"{"a": "first", "a": "second"}"#))
        let repeated = Data(#"{"repo":"o/m","repo":"x/y","revision":"main","commit":"c","files":[]}"#.utf8)
        XCTAssertEqual(RepoSnapshot.decode(repeated)?.repo, try? JSONDecoder().decode(RepoSnapshot.self, from: repeated).repo)
    }

    func testManifestReadsLikeJSONDecoder() throws {
        let snapshot = RepoSnapshot(repo: "org/model", revision: "main", commit: String(repeating: "ab", count: 20), files: [
            RepoFile(path: "config.json", size: 120, blobID: "1f2e", sha256: nil),
            RepoFile(path: "weights/model-00001-of-00002.safetensors", size: 5_368_709_120, blobID: "9a9a",
                     sha256: String(repeating: "c", count: 64)),
            RepoFile(path: "odd \"name\" \\ é/日本.txt", size: 0, blobID: "00", sha256: nil),
        ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(snapshot)
        let quick = try XCTUnwrap(JSONValue.parse(data))
        XCTAssertEqual(quick["files"]?.arrayValue?.count, 3)
        let decoded = try XCTUnwrap(RepoSnapshot.decode(data))
        XCTAssertEqual(decoded.files, snapshot.files)
        XCTAssertEqual([decoded.repo, decoded.revision, decoded.commit], [snapshot.repo, snapshot.revision, snapshot.commit])
        // Explicit nulls are what JSONDecoder reads as nil too.
        let withNull = Data(#"{"repo":"o/m","revision":"main","commit":"c","files":[{"path":"a","size":1,"blobID":"b","sha256":null}]}"#.utf8)
        XCTAssertEqual(RepoSnapshot.decode(withNull)?.files, [RepoFile(path: "a", size: 1, blobID: "b", sha256: nil)])
        XCTAssertNil(RepoSnapshot.decode(Data(#"{"repo":"o/m","files":[]}"#.utf8)))  // fields missing
        XCTAssertNil(RepoSnapshot.decode(Data("not json".utf8)))
    }
}
