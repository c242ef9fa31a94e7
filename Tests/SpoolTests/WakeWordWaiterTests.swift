// `speech wait` processes sleeping on the wake word (no inotify) survive the word's file being
// truncated under their mappings: no SIGBUS, and they still exit when the model is ready.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class WakeWordWaiterTests: DaemonTestCase {
    let repo = "org/Wake"
    let path = "model.safetensors"

    func testWaitersSurviveTheWakeFileBeingTruncated() throws {
        let size = 6 << 20
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: "\(repo)/\(path)")  // one worker slot: ~6 s
        try startDaemon(workers: 1, slots: 1)
        let detach = try speech(["download", repo, "--cache-base", cacheBase.path, "--detach"], hint: "detach")
        XCTAssertTrue(waitForExit(detach.process, timeout: 20))
        XCTAssertEqual(detach.process.terminationStatus, 0, contents(detach.stderr))
        let waiters = try (0..<3).map { i in
            try speech(["wait", repo, "--cache-base", cacheBase.path], extra: ["SPEECH_FETCH_INOTIFY": "0"], hint: "wait\(i)")
        }
        // The waiters have mapped the word once they sleep on it; their full pass (every 2 s)
        // reads it again while the file stays empty: the transfer takes longer than that.
        XCTAssertTrue(waitUntil(timeout: 10) { waiters.allSatisfy { self.mapsWakeFile($0.process.processIdentifier) } },
                      "the waiters map spool/wake")
        XCTAssertEqual(truncate(spoolPath("wake"), 0), 0)
        for (i, w) in waiters.enumerated() {
            XCTAssertTrue(waitForExit(w.process, timeout: 30), "waiter \(i) exits")
            XCTAssertEqual(w.process.terminationReason, .exit, "waiter \(i) was killed by a signal (\(w.process.terminationStatus))")
            XCTAssertEqual(w.process.terminationStatus, 0, "waiter \(i): \(contents(w.stderr))")
        }
        try assertSameBytes(repo, path)
    }

    private func mapsWakeFile(_ pid: pid_t) -> Bool {
        // /proc files report size 0: read them to their end.
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/maps") else { return false }
        defer { try? handle.close() }
        return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self).contains(spoolPath("wake"))
    }
}
