// Which xorb ranges a resumed Xet file still needs: a fetch range whose terms are partly written
// is cut into the runs of chunks still needed, each starting right after a written term's
// recorded xorb bytes; a term without recorded bytes (taken from the chunk store) cannot cut it.
import ModelCache
@testable import Transfer
import Xet
import XCTest

final class XetFilePlanTests: XCTestCase {
    let xorb = XetHash(words: (1, 2, 3, 4))
    let url = "http://cas.example/xorbs/x"

    /// Three terms of one fetch range (chunks 0..<9 at bytes 0...8999): chunks 0..<3, 3..<6, 6..<9,
    /// 1000 stored bytes a chunk and 100 file bytes a chunk.
    func plan() -> XetFilePlan {
        let fetch = XetReconstruction.Fetch(url: url, chunks: 0..<9, bytes: 0...8999)
        let terms = (0..<3).map { i in
            XetPlacedTerm(index: i, offset: Int64(i * 300), xorb: xorb, chunks: (i * 3)..<(i * 3 + 3), length: 300)
        }
        return XetFilePlan(terms: terms, covering: Array(repeating: fetch, count: 3))
    }

    func record(_ term: XetPlacedTerm, bytes: ClosedRange<Int>?) -> XetDoneTerm {
        XetDoneTerm(offset: term.offset, xorb: xorb.hex, chunkStart: term.chunks.lowerBound, chunkEnd: term.chunks.upperBound,
                    byteStart: bytes?.lowerBound ?? -1, byteEnd: bytes?.upperBound ?? -1,
                    hashes: Data(count: 96).base64EncodedString(), lengths: [100, 100, 100])
    }

    func testNothingWrittenIsOneTaskForTheWholeRange() {
        let tasks = plan().tasks(skipping: [:])
        XCTAssertEqual(tasks.map(\.chunks), [0..<9])
        XCTAssertEqual(tasks.map(\.bytes), [0...8999])
        XCTAssertEqual(tasks.map(\.terms), [[0, 1, 2]])
    }

    func testAWrittenMiddleTermCutsTheRangeAtItsRecordedBytes() {
        let p = plan()
        let done = [XetFilePlan.key(p.terms[1]): record(p.terms[1], bytes: 3000...5999)]
        let tasks = p.tasks(skipping: done)
        XCTAssertEqual(tasks.map(\.chunks), [0..<3, 6..<9])
        XCTAssertEqual(tasks.map(\.bytes), [0...2999, 6000...8999])
        XCTAssertEqual(tasks.map(\.terms), [[0], [2]])
    }

    func testWrittenLeadingTermsLeaveOnlyTheRest() {
        let p = plan()
        let done = [XetFilePlan.key(p.terms[0]): record(p.terms[0], bytes: 0...2999),
                    XetFilePlan.key(p.terms[1]): record(p.terms[1], bytes: 3000...5999)]
        let tasks = p.tasks(skipping: done)
        XCTAssertEqual(tasks.map(\.chunks), [6..<9])
        XCTAssertEqual(tasks.map(\.bytes), [6000...8999])
    }

    func testATermFromTheStoreWithoutXorbBytesFetchesTheWholeRangeForTheOthers() {
        let p = plan()
        let done = [XetFilePlan.key(p.terms[1]): record(p.terms[1], bytes: nil)]
        let tasks = p.tasks(skipping: done)
        XCTAssertEqual(tasks.map(\.chunks), [0..<9])
        XCTAssertEqual(tasks.map(\.bytes), [0...8999])
        XCTAssertEqual(tasks.map(\.terms), [[0, 2]], "only the pending terms are written")
    }

    func testEveryTermWrittenLeavesNothing() {
        let p = plan()
        let done = Dictionary(uniqueKeysWithValues: p.terms.enumerated().map { i, term in
            (XetFilePlan.key(term), record(term, bytes: (i * 3000)...(i * 3000 + 2999)))
        })
        XCTAssertTrue(p.tasks(skipping: done).isEmpty)
    }
}
