// A spool that trusts no one (docs/protocol.md, "Trust"), with real files and a real
// speech-fetchd: a spool another user could write is refused, a request planted with a target
// outside the cache fails with a marker naming it (and nothing is written there), a caller whose
// --cache-dir lies outside fetches in its own process, and a spool deleted under a live daemon
// stops it with a message.
@testable import Daemon
import Foundation
import HubTypes
import ModelCache
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class SpoolTrustTests: DaemonTestCase {
    let repo = "org/Trust"
    let path = "model.bin"

    /// Runs speech-fetchd on the base until it exits (it must, within 15 s); its status and log.
    private func fetchdRefuses(file: StaticString = #filePath, line: UInt = #line) throws -> (status: Int32, log: String) {
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "1"],
                                     environment: environment(), hint: "fetchd")
        XCTAssertTrue(waitForExit(p, timeout: 15), "speech-fetchd exits", file: file, line: line)
        return (p.terminationStatus, contents(err))
    }

    private func makeSpool() throws -> Spool { try Spool(base: cacheBase, node: "n1") }

    private func reasonOf(_ marker: String) throws -> String {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: marker))) as? [String: Any]
        return try XCTUnwrap(json?["reason"] as? String)
    }

    /// A request for one file put straight into the spool, as any writer of it could, from a node
    /// named "somewhere", into `modelDir`.
    private func plant(_ repo: String, file: String, size: Int64, commit: String = String(repeating: "a", count: 40),
                       into modelDir: String) throws -> SpoolRequest {
        let planted = SpoolRequest(repo: repo, revision: "main", commit: commit, modelDir: modelDir,
                                   files: [RepoFile(path: file, size: size, blobID: String(repeating: "b", count: 40), sha256: nil)],
                                   node: "somewhere")
        try makeSpool().submit(planted)
        return planted
    }

    /// The reason in a planted request's `failed/` marker, once it is there.
    private func failureReason(of planted: SpoolRequest) throws -> String {
        let marker = spoolPath("failed/\(planted.id).json")
        XCTAssertTrue(waitUntil(timeout: 15) { FileManager.default.fileExists(atPath: marker) }, "the planted request fails")
        return try reasonOf(marker)
    }

    func testAWorldWritableSpoolFolderIsRefusedEvenWithTheStickyBit() throws {
        _ = try makeSpool()
        XCTAssertEqual(chmod(spoolPath("requests"), 0o1777), 0)
        XCTAssertThrowsError(try makeSpool()) { XCTAssertTrue("\($0)".contains("writable by every user"), "\($0)") }
        let r = try fetchdRefuses()
        XCTAssertEqual(r.status, 1, r.log)
        XCTAssertTrue(r.log.contains("\(spoolPath("requests")) is writable by every user (mode 1777"), r.log)
        XCTAssertTrue(r.log.contains("chmod 0700"), "says what to do: \(r.log)")
        XCTAssertEqual(names("supervisors"), [], "it never served")
    }

    func testASpoolOwnedByAnotherUserIsRefused() throws {
        _ = try makeSpool()
        XCTAssertEqual(chown(spool.path, 65534, 65534), 0)
        let r = try fetchdRefuses()
        XCTAssertEqual(r.status, 1, r.log)
        XCTAssertTrue(r.log.contains("\(spool.path) belongs to user"), r.log)
    }

    func testASpoolFolderThatIsASymlinkIsRefused() throws {
        _ = try makeSpool()
        let elsewhere = temp.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        XCTAssertEqual(rmdir(spoolPath("plans")), 0)
        XCTAssertEqual(symlink(elsewhere.path, spoolPath("plans")), 0)
        let r = try fetchdRefuses()
        XCTAssertEqual(r.status, 1, r.log)
        XCTAssertTrue(r.log.contains("\(spoolPath("plans")) is a symbolic link (to \(elsewhere.path))"), r.log)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path), [], "nothing written through it")
    }

    func testAGroupSharedSpoolKeepsItsGroupModeAndIsServed() throws {
        try FileManager.default.createDirectory(at: spool, withIntermediateDirectories: true)
        XCTAssertEqual(chmod(spool.path, 0o770), 0)  // our own group: a shared cache's dedicated group
        _ = try makeSpool()
        var st = stat()
        XCTAssertEqual(lstat(spoolPath("requests"), &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o770, "folders made under a group-shared root are shared with the group")
        try startDaemon(workers: 1)
    }

    /// A request planted in the spool (any writer of it could) whose target lies outside the
    /// cache base: it fails with a marker that names the target, and nothing is written there.
    func testAPlantedRequestWithATargetOutsideTheCacheFailsAndWritesNothing() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 64 << 10])
        try startDaemon(workers: 1)
        let outside = temp.appendingPathComponent("outside/victim")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let planted = try plant(repo, file: path, size: 64 << 10, into: outside.path)
        let reason = try failureReason(of: planted)
        XCTAssertTrue(reason.contains("its target \(outside.path) lies outside the cache base"), reason)
        XCTAssertTrue(reason.contains("--hf-cache"), "says what to do: \(reason)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "nothing written there")
        XCTAssertEqual(names("plans"), [], "never planned")
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(path)"), 0, "nothing fetched")
    }

    /// A refused request is logged "refused" with its reason, never "accepted" first.
    func testARefusedRequestIsLoggedRefusedNotAccepted() throws {
        let (_, log) = try startDaemon(workers: 1)
        let outside = temp.appendingPathComponent("outside/victim")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let planted = try plant(repo, file: path, size: 10, into: outside.path)
        XCTAssertTrue(waitUntil(timeout: 15) { self.contents(log).contains("request \(planted.id)") &&
                FileManager.default.fileExists(atPath: self.spoolPath("failed/\(planted.id).json")) }, contents(log))
        let lines = contents(log).split(separator: "\n").filter { $0.contains("request \(planted.id)") }
        XCTAssertEqual(lines.count, 1, "one line for it: \(lines)")
        XCTAssertTrue(lines.first?.contains("refused \(repo) @ aaaaaaaaaaaa (request \(planted.id), node somewhere): its target") == true,
                      "\(lines)")
        XCTAssertFalse(contents(log).contains("accepted \(repo)"), contents(log))
    }

    /// A --cache-dir of another user, vouched for by its manifest, is served: the staging folder
    /// the daemon makes there itself does not turn the workers' verdict into a refusal while the
    /// supervisor's says accepted (a request nobody fetched and nobody failed: its waiter hung).
    func testAVouchedFolderOfAnotherUserIsServedAfterTheDaemonMadeItsStagingFolder() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root: the folder must belong to another user (nobody) that the daemon can still write") }
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        let own = temp.appendingPathComponent("their-models/trust")
        // Its owner's earlier download: the manifest names repo and commit. Then the file is lost.
        let first = try downloader().downloadBlocking(repo: repo, cacheDir: own)
        let snapshot = try XCTUnwrap(ModelDirectory(own).readManifest())
        XCTAssertEqual(unlink(first.directory.appendingPathComponent(path).path), 0)
        try? FileManager.default.removeItem(at: own.appendingPathComponent(".incomplete"))
        for item in [own.path] + ((try? FileManager.default.subpathsOfDirectory(atPath: own.path)) ?? []).map({ own.path + "/" + $0 }) {
            XCTAssertEqual(lchown(item, 65534, 65534), 0, item)
        }
        try startDaemon(workers: 1)
        // Asked on this node: its supervisor splices it as parts arrive.
        let node = environment()["SPEECH_FETCH_NODE"] ?? ProcessInfo.processInfo.hostName
        let request = SpoolRequest(repo: repo, revision: "main", commit: snapshot.commit, modelDir: own.path,
                                   files: snapshot.files.filter { $0.path == path }, node: node)
        try makeSpool().submit(request)
        let done = spoolPath("done/\(request.id)"), failed = spoolPath("failed/\(request.id).json")
        XCTAssertTrue(waitUntil(timeout: 20) {
            FileManager.default.fileExists(atPath: done) || FileManager.default.fileExists(atPath: failed)
        }, "the request is settled, not left waiting: \(names("done")) \(names("failed")) \(names("jobs/ready"))")
        XCTAssertFalse(FileManager.default.fileExists(atPath: failed), (try? reasonOf(failed)) ?? "")
        XCTAssertEqual(try Data(contentsOf: own.appendingPathComponent(path)), try source(repo, path))
    }

    /// A target under the base reached through a planted symlink out of it is refused too.
    func testAPlantedRequestThroughASymlinkOutOfTheBaseFails() throws {
        try startDaemon(workers: 1)
        let outside = temp.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let org = cacheBase.appendingPathComponent("models/org")
        try FileManager.default.createDirectory(at: org, withIntermediateDirectories: true)
        XCTAssertEqual(symlink(outside.path, org.appendingPathComponent("Linked").path), 0)
        let target = org.appendingPathComponent("Linked").path
        let planted = try plant("org/Linked", file: path, size: 10, into: target)
        let reason = try failureReason(of: planted)
        XCTAssertTrue(reason.contains("\(target) (really \(outside.path))"), reason)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "nothing written through the link")
    }

    /// A planted plan (bypassing the request check) is neither claimed nor spliced into its target.
    func testAPlantedPlanOutsideTheCacheIsNeverFetched() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 64 << 10])
        let outside = temp.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let spool = try makeSpool()
        let plan = PlannedFile(repo: repo, modelDir: outside.path, commit: String(repeating: "a", count: 40),
                               file: RepoFile(path: path, size: 64 << 10, blobID: String(repeating: "b", count: 40), sha256: nil),
                               rangeSize: 64 << 10, node: "n1")
        try spool.plan(plan, pending: [0])
        spool.targets = RequestTargets(base: cacheBase.path)
        XCTAssertNil(spool.claim(plan.jobName(0)), "a job of a plan pointing outside is not claimed")
        XCTAssertEqual(Splicer(spool: spool).splice(plan), .failed(try XCTUnwrap(spool.targets?.refusal(plan))))
        XCTAssertNil(spool.plannedFile(plan.key), "this node's planted plan is dropped")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outside.path), [])
    }

    /// A caller whose --cache-dir lies outside the cache base hands it over: the manifest it
    /// writes there first vouches for that repo and commit. A request planted for the same folder
    /// with another repo is refused, and writes nothing there.
    func testACacheDirOutsideTheBaseIsServedForWhatItsManifestNames() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        try startDaemon(workers: 1)
        let own = temp.appendingPathComponent("own-models/trust")
        // A --cache-dir caller hands over to the default base's spool: this test's base.
        let result = try downloader(["QWEN3_CACHE_DIR": cacheBase.path]).downloadBlocking(repo: repo, cacheDir: own)
        XCTAssertTrue(result.handedOver, "handed over")
        XCTAssertEqual(try Data(contentsOf: own.appendingPathComponent(path)), try source(repo, path))
        let before = try FileManager.default.contentsOfDirectory(atPath: own.path).sorted()
        let commit = try XCTUnwrap(result.commit)
        let planted = try plant("org/Other", file: "other.bin", size: 10, commit: commit, into: own.path)
        let reason = try failureReason(of: planted)
        XCTAssertTrue(reason.contains("holds no .speech-fetch.json of org/Other"), reason)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: own.path).sorted(), before, "nothing written there")
    }

    /// A huggingface_hub cache outside the base is served when the daemon was given it.
    func testAHubCacheTheDaemonWasGivenIsHandedOver() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        let hf = temp.appendingPathComponent("hf-hub")
        let (p, _, err) = try launch(fetchdBinary, ["--cache-base", cacheBase.path, "--workers", "1", "--hf-cache", hf.path],
                                     environment: environment(), hint: "fetchd")
        XCTAssertTrue(waitUntil(timeout: 15) { self.supervisorPid() == p.processIdentifier }, contents(err))
        XCTAssertTrue(waitUntil(timeout: 5) { self.names("").contains { $0.hasSuffix(".hf-caches") } }, "the daemon says what it serves")
        let result = try downloader().downloadBlocking(repo: repo, cacheBaseDir: cacheBase, huggingFaceCache: hf)
        XCTAssertTrue(result.handedOver, "handed over: the daemon writes into \(hf.path)")
        XCTAssertEqual(try Data(contentsOf: result.directory.appendingPathComponent(path)), try source(repo, path))
    }

    /// A supervisor record (and a node lock) that is not a pid is no daemon: a caller fetches at
    /// once instead of waiting for it, and a daemon started next takes the node over.
    func testASupervisorRecordThatIsNotAPidIsNoDaemon() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        _ = try makeSpool()
        try Data("not a pid".utf8).write(to: URL(fileURLWithPath: spoolPath("supervisors/n1")))
        try Data("junk".utf8).write(to: URL(fileURLWithPath: spoolPath("fetchd-n1.lock")))
        let started = Date()
        let (p, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path], extra: ["SPEECH_FETCH_NODE": "n1"])
        XCTAssertTrue(waitForExit(p, timeout: 15))
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "no wait for a daemon that is not there")
        XCTAssertEqual(names("requests"), [], "nothing handed over")
        try assertSameBytes(repo, path)
        let (daemon, _) = try startDaemon(workers: 1, extra: ["SPEECH_FETCH_NODE": "n1"])
        XCTAssertEqual(supervisorPid(), daemon.processIdentifier, "the next daemon takes the node over")
    }

    /// The spool deleted under a live daemon: it stops with a message (exit 1; systemd's
    /// Restart=on-failure starts it again on a fresh spool), and a caller asking again is served
    /// by the next daemon.
    func testADaemonWhoseSpoolIsDeletedStopsWithAMessage() throws {
        let (p, log) = try startDaemon(workers: 2)
        let workers = descendants(of: p.processIdentifier)
        // `rm -rf`, again until it is gone: the daemon's processes write in it meanwhile.
        XCTAssertTrue(waitUntil(timeout: 10, interval: 0.05) {
            let rm = Process()
            rm.executableURL = URL(fileURLWithPath: "/bin/rm")
            rm.arguments = ["-rf", self.spool.path]
            try? rm.run()
            rm.waitUntilExit()
            return !FileManager.default.fileExists(atPath: self.spool.path)
        }, "the spool is deleted")
        XCTAssertTrue(waitForExit(p, timeout: 10), "speech-fetchd stops")
        XCTAssertEqual(p.terminationStatus, 1)
        XCTAssertTrue(contents(log).contains("the spool \(spool.path) was deleted or replaced under this speech-fetchd; it stops"),
                      contents(log))
        XCTAssertTrue(waitUntil(timeout: 10) { !workers.contains { self.isAlive($0) } }, "its workers are gone")
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        try startDaemon(workers: 1)
        XCTAssertTrue(try download(repo).handedOver, "a new daemon serves the new spool")
        try assertSameBytes(repo, path)
    }
}
