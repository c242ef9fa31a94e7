// HubFixture - a test Hub on loopback with a temp root and a temp cache, torn down after each test.
import Digest
import Foundation
import SpeechFetch
import TestHub
import XCTest

class HubTestCase: XCTestCase {
    var temp: URL!
    var root: URL { temp.appendingPathComponent("hub") }
    var cacheBase: URL { temp.appendingPathComponent("cache") }
    var hub: TestHub!

    override func setUpWithError() throws {
        temp = FileManager.default.temporaryDirectory.appendingPathComponent("speech-fetch-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        hub = try TestHub(root: root)
    }

    override func tearDownWithError() throws {
        hub?.stop()
        hub = nil
        // The folder on /dev/shm of the spool this test's cache base got (LiveProgress, ReadyView
        // and NodeNamesView records), whether a daemon or an embedded download made it.
        var info = stat()
        if temp != nil, stat(cacheBase.appendingPathComponent("spool").path, &info) == 0 {
            try? FileManager.default.removeItem(atPath: "/dev/shm/speech-fetch-\(getuid())-\(info.st_dev)-\(info.st_ino)")
        }
        try? FileManager.default.removeItem(at: temp)
    }

    /// Fast settings: small ranges, short stall guard, retry delays of 50 ms.
    func environment(endpoint: String? = nil, extra: [String: String] = [:]) -> [String: String] {
        var env: [String: String] = [
            "HF_ENDPOINT": endpoint ?? hub.baseURL,
            "HOME": temp.path,
            "HF_HOME": temp.appendingPathComponent("hf-home").path,
            "HF_DOWNLOAD_RANGE_THRESHOLD": "\(1 << 20)",
            "HF_DOWNLOAD_RANGE_CHUNK": "\(256 << 10)",
            "HF_DOWNLOAD_RANGE_CONCURRENCY": "4",
            "HF_DOWNLOAD_STALL_TIMEOUT": "1",
            "SPEECH_FETCH_RETRY_DELAYS": "0.05",
            "SPEECH_FETCH_RETRY_ATTEMPTS": "5",
        ]
        for (k, v) in extra { env[k] = v }
        return env
    }

    func downloader(_ extra: [String: String] = [:], endpoint: String? = nil) -> HuggingFaceDownloader {
        HuggingFaceDownloader(environment: environment(endpoint: endpoint, extra: extra))
    }

    func modelDir(_ repo: String) -> URL {
        cacheBase.appendingPathComponent("models/\(repo)")
    }

    /// Source bytes of a repo file as the hub serves them.
    func source(_ repo: String, _ path: String) throws -> Data {
        try Data(contentsOf: root.appendingPathComponent("\(repo)/\(path)"))
    }

    func assertSameBytes(_ repo: String, _ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let got = try Data(contentsOf: modelDir(repo).appendingPathComponent(path))
        XCTAssertEqual(SHA256.hex(of: got), SHA256.hex(of: try source(repo, path)), "\(path) differs from the source",
                       file: file, line: line)
    }

    /// Runs a download and returns its result (blocking form, as the CLI and workers use it).
    @discardableResult
    func download(_ repo: String, include: [String] = [], offline: Bool? = nil, extra: [String: String] = [:],
                  endpoint: String? = nil, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }) throws -> DownloadResult {
        try downloader(extra, endpoint: endpoint).downloadBlocking(repo: repo, include: include, cacheBaseDir: cacheBase,
                                                                   offlineMode: offline, progress: progress)
    }

    /// Total body bytes served for a file and the byte ranges served more than once.
    func overlap(_ ranges: [Range<Int>]) -> Int {
        let sorted = ranges.sorted { $0.lowerBound < $1.lowerBound }
        var overlapBytes = 0
        var reach = 0
        for r in sorted {
            if r.lowerBound < reach { overlapBytes += min(reach, r.upperBound) - r.lowerBound }
            reach = max(reach, r.upperBound)
        }
        return overlapBytes
    }

    var speechBinary: URL {
        // .build/debug/speech next to the test bundle.
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("speech")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/speech")
    }
}

/// Collects progress events from the engine thread.
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [DownloadProgress] = []
    func add(_ p: DownloadProgress) { lock.withLock { events.append(p) } }
    var all: [DownloadProgress] { lock.withLock { events } }
}
