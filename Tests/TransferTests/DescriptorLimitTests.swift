// DescriptorLimitTests - a repo of more files than the process may open descriptors, downloaded
// by a `speech` (and a `speech-fetchd`) whose `ulimit -n` is lower than the file count.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class DescriptorLimitTests: DaemonTestCase {
    let repo = "org/ManyFiles"
    /// Below the file count: a staging file open per file of the selection cannot fit.
    let descriptorLimit = 128
    let fileCount = 300

    func makeRepo() throws {
        var files: [String: Data] = [:]
        for i in 0..<fileCount { files["shard/\(i).json"] = Data("{\"index\": \(i)}".utf8) }
        try TestHub.writeRepo(root: root, repo: repo, files: files)
    }

    /// `executable arguments…` run by a shell that lowers the descriptor limit first.
    func underLimit(_ executable: URL, _ arguments: [String]) -> (URL, [String]) {
        (URL(fileURLWithPath: "/bin/sh"), ["-c", "ulimit -n \(descriptorLimit) && exec \"$0\" \"$@\"", executable.path] + arguments)
    }

    func assertEveryFileDownloaded(file: StaticString = #filePath, line: UInt = #line) throws {
        for i in 0..<fileCount { try assertSameBytes(repo, "shard/\(i).json", file: file, line: line) }
        let staging = modelDir(repo).appendingPathComponent(".incomplete").path
        XCTAssertFalse(FileManager.default.fileExists(atPath: staging), "no staging left", file: file, line: line)
    }

    func testAnEmbeddedDownloadOfMoreFilesThanItsDescriptorLimitSucceeds() throws {
        try makeRepo()
        let (shell, arguments) = underLimit(speechBinary, ["download", repo, "--cache-base", cacheBase.path])
        let (p, _, err) = try launch(shell, arguments, environment: environment(), hint: "speech")
        XCTAssertTrue(waitForExit(p, timeout: 120), "the download ended")
        XCTAssertEqual(p.terminationStatus, 0, "speech download under ulimit -n \(descriptorLimit): \(contents(err))")
        try assertEveryFileDownloaded()
    }

    func testADaemonHostedDownloadOfMoreFilesThanTheDescriptorLimitSucceeds() throws {
        try makeRepo()
        // The daemon (supervisor and workers) and the caller all run under the low limit.
        let (daemonShell, daemonArguments) = underLimit(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "2", "--slots", "4"])
        let (daemon, _, daemonLog) = try launch(daemonShell, daemonArguments, environment: environment(), hint: "fetchd")
        let serving = waitUntil(timeout: 15) {
            self.supervisorPid() == daemon.processIdentifier && self.descendants(of: daemon.processIdentifier).count >= 2
        }
        XCTAssertTrue(serving, "speech-fetchd serves the base under ulimit -n \(descriptorLimit): \(contents(daemonLog))")
        let (shell, arguments) = underLimit(speechBinary, ["download", repo, "--cache-base", cacheBase.path])
        let (p, _, err) = try launch(shell, arguments, environment: environment(), hint: "speech")
        XCTAssertTrue(waitForExit(p, timeout: 120), "the download ended")
        XCTAssertEqual(p.terminationStatus, 0, "speech download through the daemon: \(contents(err))\ndaemon: \(contents(daemonLog))")
        XCTAssertTrue(contents(err).contains("speech-fetchd"), "the daemon hosted it: \(contents(err))")
        try assertEveryFileDownloaded()
    }
}
