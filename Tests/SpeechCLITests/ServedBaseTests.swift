// A cache base that another user's speech-fetchd serves (the packaged service's account), as
// root meets it: `speech download` writes nothing there and prints the command to run as that
// user; `speech env` and `speech status` name the same daemon.
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class ServedBaseTests: DaemonTestCase {
    let repo = "org/Served"
    let path = "model.bin"
    /// The service's account in this test: nobody, present on every Debian system.
    let serviceUID: uid_t = 65534

    override func tearDownWithError() throws {
        // The service's workers' in-flight bytes live under its own uid's name (LiveProgress).
        var info = stat()
        if temp != nil, stat(spool.path, &info) == 0 {
            try? FileManager.default.removeItem(atPath: "/dev/shm/speech-fetch-\(serviceUID)-\(info.st_dev)-\(info.st_ino)")
        }
        try super.tearDownWithError()
    }

    /// speech-fetchd as `nobody` on a base `nobody` owns; returns when it serves.
    private func startServiceDaemon() throws -> URL {
        guard geteuid() == 0 else { throw XCTSkip("needs root: the daemon runs as another user (nobody), started with setpriv") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { throw XCTSkip("needs /usr/bin/setpriv (util-linux)") }
        try FileManager.default.createDirectory(at: cacheBase, withIntermediateDirectories: true)
        XCTAssertEqual(chown(cacheBase.path, serviceUID, serviceUID), 0)
        XCTAssertEqual(chmod(temp.path, 0o755), 0)
        let (p, _, err) = try launch(URL(fileURLWithPath: "/usr/bin/setpriv"),
                                     ["--reuid=\(serviceUID)", "--regid=\(serviceUID)", "--clear-groups", fetchdBinary.path,
                                      "--cache-base", cacheBase.path, "--workers", "1"],
                                     environment: environment(), hint: "fetchd")
        XCTAssertTrue(waitUntil(timeout: 15) { self.supervisorPid() == p.processIdentifier }, "the service serves: \(contents(err))")
        return err
    }

    /// Every path under the base (the spool aside: the daemon's own) and its owner.
    private func ownersUnderBase() -> [String: uid_t] {
        var owners: [String: uid_t] = [:]
        for sub in (try? FileManager.default.subpathsOfDirectory(atPath: cacheBase.path)) ?? [] where !sub.hasPrefix("spool") {
            var st = stat()
            if lstat(cacheBase.path + "/" + sub, &st) == 0 { owners[sub] = st.st_uid }
        }
        return owners
    }

    func testRootsDownloadIntoABaseAnotherUsersDaemonServesWritesNothingAndSaysWhatToRun() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        _ = try startServiceDaemon()
        let (p, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(p, timeout: 30))
        let said = contents(err)
        XCTAssertEqual(p.terminationStatus, 1, said)
        XCTAssertTrue(said.contains("\(cacheBase.path) is served by a speech-fetchd running as nobody (pid "), said)
        XCTAssertTrue(said.contains("Run it as nobody: \(runAsNobody) \(speechBinary.path) download \(repo) --cache-base \(cacheBase.path)"), said)
        XCTAssertEqual(ownersUnderBase().filter { $0.value != serviceUID }, [:], "no path there that the service cannot write")
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), 0, "nothing fetched")

        // The command it printed works as printed, here (sudo resets the environment, and with it
        // the test Hub's HF_ENDPOINT: only runuser's line is run).
        let line = try XCTUnwrap(said.components(separatedBy: "Run it as nobody: ").last?.split(separator: "\n").first.map(String.init), said)
        guard line.hasPrefix("runuser ") else { return }
        let (run, _, runErr) = try launch(URL(fileURLWithPath: "/bin/sh"), ["-c", line], environment: environment(), hint: "as-nobody")
        XCTAssertTrue(waitForExit(run, timeout: 60))
        XCTAssertEqual(run.terminationStatus, 0, "\(line): \(contents(runErr))")
        try assertSameBytes(repo, path)
        XCTAssertEqual(ownersUnderBase().filter { $0.value != serviceUID }, [:], "the service's own files only")
    }

    /// How root runs a command as the service's account: sudo where it is installed, else
    /// runuser (util-linux, on every Debian system; a server set up with a root password has no sudo).
    private var runAsNobody: String {
        ["/usr/bin/sudo", "/bin/sudo", "/usr/local/bin/sudo"].contains { FileManager.default.isExecutableFile(atPath: $0) }
            ? "sudo -u nobody" : "runuser -u nobody --"
    }

    func testEnvAndStatusNameTheSameDaemonOfAnotherUser() throws {
        _ = try startServiceDaemon()
        let pid = try XCTUnwrap(supervisorPid())
        let env = try speech(["env", "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(env.process, timeout: 15))
        XCTAssertEqual(env.process.terminationStatus, 0, contents(env.stderr))
        XCTAssertTrue(contents(env.stdout).contains("speech-fetchd running as nobody (pid \(pid)) serves this base"), contents(env.stdout))
        let status = try speech(["status", "--cache-base", cacheBase.path])
        XCTAssertTrue(waitForExit(status.process, timeout: 15))
        let said = contents(status.stderr)
        XCTAssertEqual(status.process.terminationStatus, 1, said)
        XCTAssertTrue(said.contains("is served by a speech-fetchd running as nobody (pid \(pid))"), said)
        XCTAssertTrue(said.contains("\(runAsNobody) \(speechBinary.path) status --cache-base \(cacheBase.path)"), said)
        XCTAssertEqual(said.split(separator: "\n").count, 1, "one line: \(said)")
    }
}
