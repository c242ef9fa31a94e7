// XetFixture - the Xet-backed repos, revisions and measurements the embedded and the daemon's Xet
// tests share, so both pin the same bytes and the same bounds.
import Digest
import Foundation
import ModelCache
import TestHub
import XCTest

extension HubTestCase {
    /// A repo of one Xet-backed `path` of `size` seeded bytes and a small config (plain bytes).
    func writeXetRepo(_ repo: String, _ path: String, size: Int, seed: UInt64 = 1) throws {
        try TestHub.writeRepo(root: root, repo: repo, files: [path: seededBytes(size, seed: seed),
                                                             "config.json": Data("{\"a\": 1}".utf8)])
        hub.setXet(repo)
        XCTAssertNotNil(hub.xetHash(of: "\(repo)/\(path)"))  // stored now, not while the 1 s stall guard waits for a listing
    }

    /// A `writeXetRepo` repo was downloaded: both files' bytes, `path` through one reconstruction
    /// and its xorb ranges, nothing through the plain path (`message` says more on a failure).
    func assertXetRepoCameThroughXet(_ repo: String, _ path: String, _ message: @autoclosure () -> String = "",
                                     file: StaticString = #filePath, line: UInt = #line) throws {
        let key = "\(repo)/\(path)"
        try assertSameBytes(repo, path, file: file, line: line)
        try assertSameBytes(repo, "config.json", file: file, line: line)
        XCTAssertEqual(hub.reconstructions(for: key), 1, file: file, line: line)
        XCTAssertGreaterThan(hub.xorbRangeRequests(for: key), 0, file: file, line: line)
        XCTAssertGreaterThan(hub.xorbBytes(for: key), 0, file: file, line: line)
        XCTAssertEqual(hub.bridgeBytes(for: key), 0, "nothing through the plain path\(message())", file: file, line: line)
    }

    /// A repo whose `path` shares most of its chunks with `base.safetensors` (stored first), with
    /// a few new bytes between every 512 KiB of it: many terms from two xorbs, recorded one by
    /// one, and fetch ranges of the base's xorb that do not touch.
    func writeManyTermXetRepo(_ repo: String, _ path: String) throws {
        let base = seededBytes(4 << 20, seed: 2)
        var model = Data()
        for k in 0..<8 {
            model += base[(k * (512 << 10))..<((k + 1) * (512 << 10))]
            model += seededBytes(4096, seed: UInt64(100 + k))
        }
        try TestHub.writeRepo(root: root, repo: repo, files: ["base.safetensors": base, path: model])
        hub.setXet(repo)
        XCTAssertNotNil(hub.xetHash(of: "\(repo)/base.safetensors"))  // stored first
        XCTAssertNotNil(hub.xetHash(of: "\(repo)/\(path)"))
    }

    /// Revision 1: 16 MiB of seeded bytes. Revision 2: 1 KiB inserted at 5 MiB and 16 bytes
    /// overwritten at 11 MiB, as in issue 30's measurement.
    func xetRevisions() -> (first: Data, second: Data) {
        let first = seededBytes(16 << 20, seed: 11)
        var second = first
        second.insert(contentsOf: seededBytes(1024, seed: 12), at: 5 << 20)
        second.replaceSubrange((11 << 20)..<((11 << 20) + 16), with: seededBytes(16, seed: 13))
        return (first, second)
    }

    /// Revision 2 of `key` ("org/name/path") came mostly from revision 1 in the cache: some new
    /// chunks from the CAS, at most 2 % of its bytes, nothing through the plain path.
    func assertRevisionTwoFetchedOnlyItsNewChunks(_ key: String, second: Data, label: String,
                                                  file: StaticString = #filePath, line: UInt = #line) {
        let fetched = hub.xorbBytes(for: key)
        print("\(label): revision 2 (\(second.count) bytes) fetched \(fetched) xorb bytes")
        XCTAssertGreaterThan(fetched, 0, "the new chunks come from the CAS", file: file, line: line)
        XCTAssertLessThanOrEqual(Double(fetched), 0.02 * Double(second.count), file: file, line: line)
        XCTAssertEqual(hub.bridgeBytes(for: key), 0, file: file, line: line)
    }

    /// `path` of `repo` came through the Xet path into the huggingface_hub cache `hubCache`: the
    /// source's bytes in `directory` (the call's snapshot folder), one reconstruction, no bridge
    /// byte, and a blob named by its SHA-256 (the folder's name spelled here, as huggingface_hub
    /// spells it, not taken from the code under test).
    func assertXetFileIsAHubCacheBlob(_ repo: String, _ path: String, in directory: URL, hubCache: URL,
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        let got = try Data(contentsOf: directory.appendingPathComponent(path))
        XCTAssertEqual(got, try source(repo, path), file: file, line: line)
        XCTAssertEqual(hub.reconstructions(for: "\(repo)/\(path)"), 1, file: file, line: line)
        XCTAssertEqual(hub.bridgeBytes(for: "\(repo)/\(path)"), 0, file: file, line: line)
        let blobs = hubCache.appendingPathComponent("models--\(repo.replacingOccurrences(of: "/", with: "--"))/blobs")
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: blobs.path).contains(SHA256.hex(of: got)),
                      "the file is a blob named by its SHA-256, as huggingface_hub keeps it", file: file, line: line)
    }

    /// `path` of `repo` (`size` bytes) came through the bridge alone (HF_HUB_DISABLE_XET), byte
    /// for byte: no reconstruction, no xorb byte.
    func assertBridgedOnly(_ repo: String, _ path: String, size: Int, _ message: String = "",
                           file: StaticString = #filePath, line: UInt = #line) throws {
        try assertSameBytes(repo, path, file: file, line: line)
        XCTAssertEqual(hub.reconstructions(for: "\(repo)/\(path)"), 0, file: file, line: line)
        XCTAssertEqual(hub.xorbBytes(for: "\(repo)/\(path)"), 0, file: file, line: line)
        XCTAssertEqual(hub.bridgeBytes(for: "\(repo)/\(path)"), size, message, file: file, line: line)
    }

    /// Reads the sidecar of `path` in `repo`'s model directory every 20 ms until `seen` returns a
    /// value (nil after `timeout` seconds).
    func watchSidecar<Seen>(_ repo: String, _ path: String, timeout: Double = 30,
                            until seen: (Sidecar) -> Seen?) -> Seen? {
        let sidecar = StagingFile.sidecarURL(path, in: ModelDirectory(modelDir(repo)))
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let data = FileManager.default.contents(atPath: sidecar.path),
               let record = try? JSONDecoder().decode(Sidecar.self, from: data), let value = seen(record) {
                return value
            }
            usleep(20_000)
        }
        return nil
    }

    /// The xorb bytes a whole download of `path` takes: counters reset, then a fresh embedded
    /// download into a directory of its own.
    func xorbBytesOfAFreshDownload(_ repo: String, _ path: String) throws -> Int {
        hub.resetCounters()
        _ = try downloader().downloadBlocking(repo: repo, include: [path], cacheDir: temp.appendingPathComponent("fresh"))
        return hub.xorbBytes(for: "\(repo)/\(path)")
    }
}
