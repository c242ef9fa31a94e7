// A spool record that was read whole but does not parse (truncated, garbage) goes to
// spool/corrupt/ with a log line, and the request goes on from what is on disk: no caller,
// waiter, daemon or `speech cache` command ever hangs on it or reports a reason it invented.
import CacheAdmin
import Daemon
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class CorruptSpoolRecordTests: DaemonTestCase {
    let repo = "org/Records"
    let path = "model.safetensors"
    var file: String { "\(repo)/\(path)" }
    var base: String { cacheBase.path }

    func plant(_ sub: String, _ bytes: Data) throws {
        // Written beside and renamed in, as a broken writer or a disk error would leave it whole.
        let temp = spoolPath("tmp/planted")
        try bytes.write(to: URL(fileURLWithPath: temp))
        XCTAssertEqual(rename(temp, spoolPath(sub)), 0)
    }

    func truncated(_ sub: String, to length: Int) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: spoolPath(sub))).prefix(length)
    }

    func testTruncatedRequestIsSetAsideAndTheSameDownloadCompletes() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        let daemon = try startDaemon()
        try download(repo)
        let request = try XCTUnwrap(names("requests").first)
        let broken = try truncated("requests/\(request)", to: 20)
        XCTAssertTrue(try CacheAdmin(cacheBase: cacheBase, environment: environment()).remove(repo: repo).bytesFreed > 0)
        try plant("requests/\(request)", broken)  // `truncate -s 20` of the record the next call will ask under

        let client = try speech(["download", repo, "--cache-base", base], hint: "download")
        XCTAssertTrue(waitForExit(client.process, timeout: 20), "the download does not hang on the truncated request")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr) + "\ndaemon log:\n" + contents(daemon.log))
        try assertSameBytes(repo, path)
        XCTAssertEqual(names("corrupt").count, 1, "the truncated record is kept aside: \(names("corrupt"))")
        XCTAssertTrue(names("corrupt").first?.hasPrefix("requests.\(request).") == true, "\(names("corrupt"))")
        XCTAssertTrue((contents(client.stderr) + contents(daemon.log)).contains("moved the unreadable record"),
                      "a log line says what was moved where")
        XCTAssertEqual(names("requests"), [request], "the request was asked afresh under its id")
    }

    /// A record's layout is a type: `"hf"` and absent read as the two layouts; any other value
    /// (a newer version's) makes the record unreadable, set aside, never served in another layout.
    func testARequestInALayoutThisVersionDoesNotKnowIsSetAsideNotWrittenNatively() throws {
        let spool = try Spool(base: cacheBase, node: "t")
        let commit = String(repeating: "a", count: 40)
        let file = RepoFile(path: path, size: 3, blobID: String(repeating: "b", count: 40), sha256: nil)
        func record(_ layout: String?) throws -> (id: String, data: Data) {
            let request = SpoolRequest(repo: repo, revision: "main", commit: commit, modelDir: modelDir(repo).path + (layout ?? "-native"),
                                       files: [file], node: "t")
            var object = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(request)) as? [String: Any])
            object["layout"] = layout
            return (request.id, try JSONSerialization.data(withJSONObject: object))
        }
        for layout in [nil, "hf", "zz"] {
            let (id, data) = try record(layout)
            try plant("requests/\(id).json", data)
        }
        let layouts = spool.requests().map { $0.directory.layout }.sorted { $0.rawValue < $1.rawValue }
        XCTAssertEqual(layouts, [.huggingFace, .native], "the unknown layout is not read as the native one")
        XCTAssertEqual(names("corrupt").count, 1, "\(names("corrupt"))")
    }

    func testGarbageRequestIsSeenByStatusWaitDetachAndClean() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        try download(repo)  // embedded: no daemon, the model is complete
        let spool = try Spool(base: cacheBase, node: "t")
        let request = SpoolRequest(repo: repo, revision: "main", commit: String(repeating: "a", count: 40),
                                   modelDir: modelDir(repo).path, files: [], node: "t")
        try plant("requests/\(request.id).json", Data("{\"garbage\": tr".utf8))

        let status = try SpoolStatus.read(cacheBase: cacheBase, environment: environment())
        XCTAssertEqual(status.requests.count, 0)
        XCTAssertEqual(status.corruptRecords.count, 1, "status says a record was set aside")
        XCTAssertEqual(spool.corruptRecords().count, 1)

        // `speech cache clean` keeps what was set aside for a day, then removes it.
        let admin = CacheAdmin(cacheBase: cacheBase, environment: environment())
        XCTAssertFalse(admin.clean().removed.contains { $0.reason.contains("unreadable spool record") })
        for name in names("corrupt") {
            var times = [timespec(tv_sec: time(nil) - 2 * 86_400, tv_nsec: 0), timespec(tv_sec: time(nil) - 2 * 86_400, tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, spoolPath("corrupt/\(name)"), &times, 0), 0)
        }
        let report = admin.clean()
        XCTAssertTrue(report.removed.contains { $0.reason.contains("unreadable spool record") }, "\(report.removed)")
        XCTAssertEqual(names("corrupt"), [])
    }

    func testGarbagePlanMidTransferIsReplannedFromTheSidecar() throws {
        let size = 4 << 20  // 16 ranges of 256 KiB
        try TestHub.generateRepo(root: root, repo: repo, files: [path: size])
        hub.setFault(.rateLimit(bytesPerSecond: 4 << 20), for: file)
        let daemon = try startDaemon(workers: 1, slots: 2)
        let client = try speech(["download", repo, "--cache-base", base], hint: "download")
        XCTAssertTrue(waitUntil(timeout: 15) { (self.sidecar(self.repo, self.path)?.done.count ?? 0) >= 2 },
                      "some ranges are spliced; log:\n\(contents(daemon.log))")
        let plan = try XCTUnwrap(names("plans").first)
        try plant("plans/\(plan)", Data("garbage".utf8))

        XCTAssertTrue(waitForExit(client.process, timeout: 30), "the transfer goes on after its plan turned to garbage")
        XCTAssertEqual(client.process.terminationStatus, 0, contents(client.stderr) + "\ndaemon log:\n" + contents(daemon.log))
        try assertSameBytes(repo, path)
        XCTAssertTrue(names("corrupt").contains { $0.hasPrefix("plans.\(plan).") }, "\(names("corrupt"))")
        XCTAssertLessThanOrEqual(hub.bodyBytes(for: file), size + 4 * (256 << 10), "re-planned from the sidecar, not from zero")
        XCTAssertEqual(names("plans"), [])
    }

    func testGarbageFailureMarkerOfACompleteModelIsNotAFailure() throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [path: 2 << 20])
        try startDaemon()
        try download(repo)
        let request = try XCTUnwrap(names("requests").first)
        let id = String(request.dropLast(5))
        try plant("failed/\(id).json", Data("\u{0}\u{0}garbage".utf8))

        let waiter = try speech(["wait", repo, "--cache-base", base, "--timeout", "10"], hint: "wait")
        XCTAssertTrue(waitForExit(waiter.process, timeout: 15))
        XCTAssertEqual(waiter.process.terminationStatus, 0, "a complete model is not \"failed: failed\": \(contents(waiter.stderr))")
        XCTAssertFalse(contents(waiter.stderr).contains("failed: failed"))
        XCTAssertEqual(names("failed"), [])
        XCTAssertTrue(names("corrupt").contains { $0.hasPrefix("failed.\(id).json.") }, "\(names("corrupt"))")
    }

    func testGarbageFileFailureIsSetAsideAndTheFileTriedAgain() throws {
        let spool = try Spool(base: cacheBase, node: "t")
        let key = PlannedFile.key(modelDir: modelDir(repo).path, path: path, commit: String(repeating: "b", count: 40))
        try plant("failures/\(key).json", Data("[1,2".utf8))
        XCTAssertNil(spool.failure(of: key), "garbage is no reason")
        XCTAssertEqual(names("failures"), [])
        spool.recordFailure(key, FailureRecord(.notFound, "HTTP 404"))
        XCTAssertEqual(spool.failure(of: key), FailureRecord(.notFound, "HTTP 404"), "a real failure can be recorded in its place")
    }

    func testAFailureRecordWithoutAKnownKindStillReads() throws {
        // Written before kinds were recorded, or by a newer version with a kind unknown here: the
        // reason stands, the kind is `other`, and nothing goes to corrupt/.
        let spool = try Spool(base: cacheBase, node: "t")
        let key = PlannedFile.key(modelDir: modelDir(repo).path, path: path, commit: String(repeating: "b", count: 40))
        try plant("failures/\(key).json", Data(#"{"reason": "cancelled by `speech cancel`"}"#.utf8))
        XCTAssertEqual(spool.failure(of: key), FailureRecord(.other, "cancelled by `speech cancel`"))
        let id = String(repeating: "e", count: 24)
        try plant("failed/\(id).json", Data(#"{"reason": "HTTP 404", "kind": "meteor-strike"}"#.utf8))
        XCTAssertEqual(spool.state(of: id), .failed(FailureRecord(.other, "HTTP 404")))
        try plant("failed/\(id).json", Data(#"{"reason": "HTTP 404", "kind": "not-found"}"#.utf8))
        XCTAssertEqual(spool.state(of: id), .failed(FailureRecord(.notFound, "HTTP 404")))
        XCTAssertEqual(names("corrupt"), [])
    }

    /// A plan of a kind this version does not know (a newer version's), or a Xet job that is not
    /// one whole Xet-backed file, is set aside: never fetched as byte ranges.
    func testAPlanOfAnUnknownKindOrABadXetJobIsSetAsideNotFetchedAsRanges() throws {
        let spool = try Spool(base: cacheBase, node: "t")
        let file = RepoFile(path: path, size: 4 << 20, blobID: String(repeating: "a", count: 40), sha256: String(repeating: "b", count: 64),
                            xetHash: String(repeating: "d", count: 64))
        let good = PlannedFile(repo: repo, modelDir: modelDir(repo).path, commit: String(repeating: "c", count: 40), file: file,
                               rangeSize: file.size, node: "t", kind: .xet)
        let plain = RepoFile(path: path, size: file.size, blobID: file.blobID, sha256: file.sha256)
        let cases: [(String, PlannedFile, (inout [String: Any]) -> Void)] = [
            ("unknown kind", good, { $0["kind"] = "xorb-ranges" }),
            ("a Xet job of several ranges", PlannedFile(repo: repo, modelDir: modelDir(repo).path, commit: good.commit, file: file,
                                                        rangeSize: 1 << 20, node: "t", kind: .xet), { _ in }),
            ("a Xet job of a file without a Xet hash", PlannedFile(repo: repo, modelDir: modelDir(repo).path, commit: good.commit,
                                                                   file: plain, rangeSize: plain.size, node: "t", kind: .xet), { _ in }),
        ]
        for (what, plan, edit) in cases {
            var record = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(plan)) as? [String: Any])
            edit(&record)
            try plant("plans/\(plan.key).json", JSONSerialization.data(withJSONObject: record))
            XCTAssertNil(spool.lookPlan(plan.key).value ?? nil, what)
            XCTAssertTrue(names("corrupt").contains { $0.hasPrefix("plans.\(plan.key).json.") }, "\(what): \(names("corrupt"))")
            for name in names("corrupt") { unlink(spoolPath("corrupt/\(name)")) }
        }
        try plant("plans/\(good.key).json", JSONEncoder().encode(good))
        XCTAssertEqual(spool.lookPlan(good.key).value ?? nil, good, "a Xet job of one whole Xet-backed file reads")
    }

    func testAnUnreadableRecordIsLookedAtAgainNotSetAside() throws {
        // A read that fails (here: not a regular file; on NFS an ESTALE) is no verdict on the record.
        let spool = try Spool(base: cacheBase, node: "t")
        let id = String(repeating: "c", count: 24)
        XCTAssertEqual(mkdir(spoolPath("failed/\(id).json"), 0o700), 0)
        XCTAssertEqual(spool.state(of: id), .active)
        XCTAssertEqual(names("corrupt"), [], "only a record read whole that does not parse is corrupt")
    }

    func testJunkNamesInTheSpoolAreNotBusyWorkers() throws {
        try startDaemon(workers: 1)
        for junk in ["junk@node@1", "x.000001@node@2", "\(String(repeating: "d", count: 24)).000001@@3"] {
            try plant("jobs/claimed/\(junk)", Data())
        }
        let status = try SpoolStatus.read(cacheBase: cacheBase, environment: environment())
        XCTAssertTrue(status.busyWorkers.isEmpty, "\(status.busyWorkers)")
    }
}
