// The update scenario, embedded: revision 2 of a Xet-backed file that shares most of its chunks
// with revision 1 in the cache fetches only the chunks the cache lacks, reading the rest from
// revision 1's final file through the cache base's chunk index; an index entry into a file that
// changed or was evicted is ignored and those chunks are fetched.
import Foundation
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class XetUpdateTests: HubTestCase {
    let repo = "org/XetUpdate"
    let path = "model.safetensors"
    var key: String { "\(repo)/\(path)" }
    /// How long revision 1 took (for the report's ratio, not asserted).
    var firstSeconds = 0.0

    /// Revision 1 downloaded, then the Hub's copy replaced by revision 2 (a new commit).
    func downloadFirstThenPublishSecond() throws -> Data {
        let (first, second) = xetRevisions()
        try TestHub.writeRepo(root: root, repo: repo, files: [path: first])
        hub.setXet(repo)
        XCTAssertNotNil(hub.xetHash(of: key))  // stored now, not while the 1 s stall guard waits for a listing
        let started = Date()
        try download(repo)
        firstSeconds = Date().timeIntervalSince(started)
        try assertSameBytes(repo, path)
        try TestHub.writeRepo(root: root, repo: repo, files: [path: second])
        // Stored in the CAS now: the first listing would otherwise take longer than the tests'
        // 1 s stall guard, and a call whose cache is complete takes that for an unreachable Hub.
        XCTAssertNotNil(hub.xetHash(of: key))
        hub.resetCounters()
        return second
    }

    func testRevisionTwoFetchesAtMostTwoPercentOfItsBytes() throws {
        let second = try downloadFirstThenPublishSecond()
        let index = cacheBase.appendingPathComponent("xet-index")
        XCTAssertFalse((try FileManager.default.contentsOfDirectory(atPath: index.path)).isEmpty, "revision 1 is indexed")
        let started = Date()
        let result = try download(repo)
        let secondSeconds = Date().timeIntervalSince(started)
        XCTAssertEqual(result.fetched, [path])
        let indexBytes = try FileManager.default.subpathsOfDirectory(atPath: index.path).reduce(0) { sum, sub in
            sum + ((try? FileManager.default.attributesOfItem(atPath: index.path + "/" + sub)[.size] as? Int) ?? 0)
        }
        print(String(format: "xet update: revision 1 in %.2f s, revision 2 in %.2f s; the chunk index holds %d bytes", firstSeconds, secondSeconds, indexBytes))
        try assertSameBytes(repo, path)
        assertRevisionTwoFetchedOnlyItsNewChunks(key, second: second, label: "xet update")
    }

    func testAnEntryIntoAChangedFileIsIgnoredAndThoseChunksAreFetched() throws {
        let second = try downloadFirstThenPublishSecond()
        // A byte of revision 1's final file changes under the index (at 3 MiB: a chunk revision 2 shares).
        let final = modelDir(repo).appendingPathComponent(path)
        let handle = try FileHandle(forUpdating: final)
        try handle.seek(toOffset: 3 << 20)
        let byte = try XCTUnwrap(handle.read(upToCount: 1)).first ?? 0
        try handle.seek(toOffset: 3 << 20)
        handle.write(Data([byte ^ 0xFF]))
        try handle.close()
        try download(repo)
        try assertSameBytes(repo, path)
        let fetched = hub.xorbBytes(for: key)
        XCTAssertGreaterThan(Double(fetched), 0.02 * Double(second.count), "the changed chunk's term came from the CAS")
        XCTAssertLessThan(Double(fetched), 0.5 * Double(second.count), "the terms after the change still came from the cache")
    }

    func testAnEntryAimedAtAFIFOIsIgnoredWithoutBlocking() throws {
        let second = try downloadFirstThenPublishSecond()
        // Every entry of the index now names a FIFO (no writer: an open for reading would block).
        let fifo = temp.appendingPathComponent("fifo").path
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let index = cacheBase.appendingPathComponent("xet-index")
        for sub in try FileManager.default.subpathsOfDirectory(atPath: index.path) where sub.hasSuffix(".json") {
            let url = index.appendingPathComponent(sub)
            var entry = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
            entry["path"] = fifo
            try JSONSerialization.data(withJSONObject: entry).write(to: url)
        }
        try download(repo)
        try assertSameBytes(repo, path)
        XCTAssertGreaterThan(Double(hub.xorbBytes(for: key)), 0.9 * Double(second.count), "nothing could be read from the cache")
    }

    func testAnEntryIntoAnEvictedFileIsIgnoredAndTheFileIsFetched() throws {
        let second = try downloadFirstThenPublishSecond()
        try FileManager.default.removeItem(at: modelDir(repo).appendingPathComponent(path))
        try download(repo)
        try assertSameBytes(repo, path)
        XCTAssertGreaterThan(Double(hub.xorbBytes(for: key)), 0.9 * Double(second.count), "nothing could be read from the cache")
    }
}
