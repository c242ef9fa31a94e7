// What users of `hf download` type, and the rough edges a new user met: --local-dir, the hf flag
// map in --help, "did you mean", --token (never echoed, never in a child's argv), --force-download,
// HF_HUB_ENABLE_HF_TRANSFER, --detach --json, Ctrl-C's real path, an --include that matches
// nothing, the catalog miss behind a mirror, `cache rm` during an embedded download, JSON without
// `\/`, and `speech env`. Real processes against the test Hub.
import Foundation
import ModelCache
import TestHub
@testable import TestSupport
import XCTest

final class HFParityTests: DaemonTestCase {
    let repo = "org/Parity"
    let big = "weights/weight.bin"

    func makeRepo(size: Int = 3 << 20) throws {
        try TestHub.generateRepo(root: root, repo: repo, files: [big: size, "voices/af_heart.json": 10_240])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{\"a\": 1}".utf8)])
    }

    /// Runs `speech` to its end.
    @discardableResult
    func run(_ arguments: [String], extra: [String: String] = [:], input: String? = nil) throws -> (out: String, err: String, status: Int32) {
        var stdin: FileHandle?
        if let input {
            let file = temp.appendingPathComponent("stdin-\(UUID().uuidString)")
            try Data(input.utf8).write(to: file)
            stdin = try FileHandle(forReadingFrom: file)
        }
        let (p, out, err) = try speech(arguments, extra: extra, standardInput: stdin)
        XCTAssertTrue(waitForExit(p, timeout: 60), "speech \(arguments) did not exit")
        return (contents(out), contents(err), p.terminationStatus)
    }

    // MARK: hf spellings

    func testLocalDirIsTheModelDirectoryAsCacheDirIs() throws {
        try makeRepo()
        let dir = temp.appendingPathComponent("local")
        let r = try run(["download", repo, "config.json", "--local-dir", dir.path, "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 64, "--local-dir is --cache-dir, which --cache-base excludes: \(r.err)")
        let ok = try run(["download", repo, "config.json", "--local-dir", dir.path])
        XCTAssertEqual(ok.status, 0, ok.err)
        XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent("config.json")), Data("{\"a\": 1}".utf8))
    }

    /// `$(speech download …)` is the model directory, as `$(hf download …)` is: stdout carries
    /// the path alone, fetched or cached, with or without --quiet; the progress lines and the
    /// summary go to stderr.
    func testCommandSubstitutionCapturesExactlyTheModelDirectory() throws {
        try makeRepo()
        let script = #"dir=$("$0" download "$1" --cache-base "$2" "$3") || exit 9; printf '%s' "$dir""#
        let path = modelDir(repo).path
        for (round, flag) in [(1, "--revision=main"), (2, "--revision=main"), (3, "--quiet")] {
            let (p, out, err) = try launch(URL(fileURLWithPath: "/bin/sh"), ["-c", script, speechBinary.path, repo, cacheBase.path, flag],
                                           environment: environment(extra: [:]), hint: "sh")
            XCTAssertTrue(waitForExit(p, timeout: 60), "speech download did not exit")
            XCTAssertEqual(p.terminationStatus, 0, contents(err))
            XCTAssertEqual(contents(out), path, "round \(round) \(flag): stdout is the directory alone")
            let said = contents(err)
            switch round {
            case 1:
                XCTAssertTrue(said.contains("done config.json ("), "progress lines on stderr: \(said)")
                XCTAssertTrue(said.contains("\(repo): 3 files in \(path) (3 fetched, "), "the summary on stderr: \(said)")
            case 2: XCTAssertTrue(said.contains("\(repo): 3 files in \(path) (0 fetched, "), "cached: \(said)")
            default: XCTAssertEqual(said, "", "--quiet says nothing on stderr")
            }
        }
    }

    func testHelpSaysHowTheCacheFlagsMapToHfs() throws {
        let help = try run(["download", "--help"]).out
        for needle in ["--local-dir DIR is --cache-dir DIR", "hf's --cache-dir DIR (a huggingface_hub cache root) is --hf-cache DIR",
                       "--cache-base", "--token", "--force-download", "HF_HUB_ENABLE_HF_TRANSFER has no effect"] {
            XCTAssertTrue(help.contains(needle), "\(needle) in:\n\(help)")
        }
    }

    func testUnknownOptionsGetADidYouMeanHint() throws {
        let cases: [([String], String)] = [
            (["download", "org/x", "--cache-dri", "A"], "did you mean --cache-dir?"),
            (["download", "org/x", "--cache_dir", "A"], "did you mean --cache-dir?"),
            (["download", "org/x", "--exclud", "*.bin"], "did you mean --exclude?"),
            (["download", "org/x", "--repo-type", "dataset"], "model repos only"),
            (["download", "org/x", "--repo-type", "space"], "hf download --repo-type space"),
            (["wait", "org/x", "--timout", "3"], "did you mean --timeout?"),
        ]
        for (words, hint) in cases {
            let r = try run(words)
            XCTAssertEqual(r.status, 64, "\(words): \(r.err)")
            XCTAssertEqual(r.err.split(separator: "\n").count, 1, r.err)
            XCTAssertTrue(r.err.contains(hint), "\(words): \(r.err)")
        }
        let typo = try run(["download", "kokor"])
        XCTAssertEqual(typo.status, 64, typo.err)
        XCTAssertTrue(typo.err.contains("did you mean kokoro?"), "a catalog typo gets the nearest name: \(typo.err)")
        let far = try run(["download", "org/x", "--frobnicate"])
        XCTAssertFalse(far.err.contains("did you mean"), "nothing is near --frobnicate: \(far.err)")
    }

    /// The most sockets `pid` held open at once while it ran.
    func mostSockets(of p: Process) -> Int {
        var most = 0
        while p.isRunning {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(p.processIdentifier)/fd")) ?? []
            let sockets = fds.filter { ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(p.processIdentifier)/fd/\($0)")) ?? "").hasPrefix("socket:") }
            most = max(most, sockets.count)
            usleep(10_000)
        }
        return most
    }

    func testMaxWorkersSetsTheConnectionsOfThisProcessLikeHfs() throws {
        // 3 MiB in 12 ranges, each answer paced to 1 MiB/s: the download lasts while its
        // sockets are counted. The fixture's HF_DOWNLOAD_RANGE_CONCURRENCY is 4.
        try makeRepo()
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: "\(repo)/\(big)")
        var most: [String: Int] = [:]
        for flag in ["--max-workers", "-x", "--connections"] {
            try? FileManager.default.removeItem(at: cacheBase)
            let (p, _, err) = try speech(["download", repo, big, "--cache-base", cacheBase.path, flag, "1"], hint: "one")
            most[flag] = mostSockets(of: p)
            XCTAssertTrue(waitForExit(p, timeout: 60))
            XCTAssertEqual(p.terminationStatus, 0, contents(err))
            try assertSameBytes(repo, big)
        }
        try FileManager.default.removeItem(at: cacheBase)
        let (p, _, err) = try speech(["download", repo, big, "--cache-base", cacheBase.path], hint: "four")
        let four = mostSockets(of: p)
        XCTAssertTrue(waitForExit(p, timeout: 60))
        XCTAssertEqual(p.terminationStatus, 0, contents(err))
        print("sockets at once: \(most) with 1 connection, \(four) with the environment's 4")
        // The same other sockets either way (the Hub API's kept-alive connection, libcurl's
        // wake-up pair): four range connections hold three more than one does.
        for (flag, n) in most {
            XCTAssertLessThanOrEqual(n, four - 3, "\(flag) 1: one connection for the ranges, against 4 without the flag")
        }
        for bad in ["0", "17", "many", "-1", "2.5"] {
            let r = try run(["download", repo, "--max-workers", bad])
            XCTAssertEqual(r.status, 64, "--max-workers \(bad): \(r.err)")
            XCTAssertTrue(r.err.contains("--max-workers") && r.err.contains("'\(bad)'") && r.err.contains("1 to 16"), r.err)
        }
        let detached = try run(["download", repo, "-x", "2", "--detach", "--cache-base", cacheBase.path])
        XCTAssertEqual(detached.status, 64, detached.err)
        XCTAssertTrue(detached.err.contains("speech-fetchd --workers"), detached.err)
    }

    func testTokenOpensAGatedRepoFromArgvOrStdinAndIsNeverPrinted() throws {
        try makeRepo()
        let token = "hf_parity_secret_token"
        hub.setGated(repo, token: token)
        let denied = try run(["download", repo, "config.json", "--cache-base", cacheBase.path])
        XCTAssertEqual(denied.status, 1, denied.err)
        let argv = try run(["download", repo, "config.json", "--cache-base", cacheBase.path, "--token", token, "--json"])
        XCTAssertEqual(argv.status, 0, argv.err)
        XCTAssertFalse((argv.out + argv.err).contains(token), "never echoed")
        let stdin = try run(["download", repo, "voices/af_heart.json", "--cache-base", cacheBase.path, "--token", "-"], input: token + "\n")
        XCTAssertEqual(stdin.status, 0, stdin.err)
        XCTAssertFalse((stdin.out + stdin.err).contains(token), "never echoed")
        XCTAssertTrue(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("voices/af_heart.json").path))
        let empty = try run(["download", repo, "--cache-base", cacheBase.path, "--token", "-"], input: "")
        XCTAssertEqual(empty.status, 64, empty.err)
        XCTAssertTrue(empty.err.contains("--token - read no token from stdin"), empty.err)
        let wrong = try run(["download", repo, "config.json", "--cache-base", cacheBase.path, "--token", "hf_wrong_one"])
        XCTAssertEqual(wrong.status, 1)
        XCTAssertFalse(wrong.err.contains("hf_wrong_one"), "a refused token is not echoed either: \(wrong.err)")
        XCTAssertTrue(wrong.err.contains("the token given with --token was refused"), wrong.err)
        XCTAssertFalse(wrong.err.contains("set HF_TOKEN"), "the refused token came from --token: \(wrong.err)")
    }

    func testCacheDirAtAHuggingFaceHubCacheRootIsRefusedSuggestingHfCache() throws {
        try makeRepo()
        let root = temp.appendingPathComponent("hf-hub")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("models--org--other"), withIntermediateDirectories: true)
        let r = try run(["download", repo, "config.json", "--cache-dir", root.path])
        XCTAssertEqual(r.status, 64, r.err)
        XCTAssertTrue(r.err.contains("--hf-cache \(root.path)"), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: root.appendingPathComponent("config.json").path), "nothing written into the root")
    }

    func testRepoTypeModelIsAcceptedAsHfDoes() throws {
        try makeRepo()
        let r = try run(["download", repo, "config.json", "--cache-base", cacheBase.path, "--repo-type", "model"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(FileManager.default.fileExists(atPath: modelDir(repo).appendingPathComponent("config.json").path))
    }

    func testATokenNeverReachesADetachedDaemonsArgvOrEnvironment() throws {
        try makeRepo()
        let token = "hf_parity_child_token"
        let r = try run(["download", repo, "--cache-base", cacheBase.path, "--detach", "--token", "-"], input: token)
        XCTAssertEqual(r.status, 0, r.err)
        guard let pid = supervisorPid() else { return XCTFail("no daemon started: \(r.out) \(r.err)") }
        adoptStranger(pid)
        XCTAssertTrue(waitUntil(timeout: 15) { !self.descendants(of: pid).isEmpty }, "the daemon's workers start")
        for process in [pid] + descendants(of: pid) {
            let cmdline = (FileManager.default.contents(atPath: "/proc/\(process)/cmdline")).map { String(decoding: $0, as: UTF8.self) } ?? ""
            let environ = (FileManager.default.contents(atPath: "/proc/\(process)/environ")).map { String(decoding: $0, as: UTF8.self) } ?? ""
            XCTAssertFalse(cmdline.contains(token), "pid \(process)'s argv holds the token")
            XCTAssertFalse(environ.contains(token), "pid \(process)'s environment holds the token")
        }
    }

    func testForceDownloadFetchesCachedFilesAgain() throws {
        try makeRepo()
        XCTAssertEqual(try run(["download", repo, "--cache-base", cacheBase.path]).status, 0)
        hub.resetCounters()
        XCTAssertEqual(try run(["download", repo, "--cache-base", cacheBase.path]).status, 0)
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(big)"), 0, "a cached file is not fetched")
        let forced = try run(["download", repo, "--cache-base", cacheBase.path, "--force-download", "--json"])
        XCTAssertEqual(forced.status, 0, forced.err)
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(big)"), 3 << 20, "--force-download fetches it again")
        XCTAssertTrue(forced.out.contains("\"fetched\":["), forced.out)
        XCTAssertTrue(forced.out.contains(big), forced.out)
        let offline = try run(["download", repo, "--cache-base", cacheBase.path, "--force-download", "--offline"])
        XCTAssertEqual(offline.status, 64, offline.err)
        XCTAssertTrue(offline.err.contains("--force-download") && offline.err.contains("--offline"), offline.err)
    }

    func testHFTransferIsSaidOnceToHaveNoEffect() throws {
        try makeRepo()
        let r = try run(["download", repo, "config.json", "--cache-base", cacheBase.path], extra: ["HF_HUB_ENABLE_HF_TRANSFER": "1"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.err.components(separatedBy: "HF_HUB_ENABLE_HF_TRANSFER has no effect").count - 1, 1, r.err)
        XCTAssertTrue(r.err.contains("byte ranges"), r.err)
        let quiet = try run(["download", repo, "config.json", "--cache-base", cacheBase.path])
        XCTAssertFalse(quiet.err.contains("HF_HUB_ENABLE_HF_TRANSFER"), quiet.err)
    }

    // MARK: Rough edges

    func testDetachJSONPrintsAnAcceptedEventWithTheRequestID() throws {
        try makeRepo()
        let r = try run(["download", repo, "--cache-base", cacheBase.path, "--detach", "--json"])
        XCTAssertEqual(r.status, 0, r.err)
        if let pid = supervisorPid() { adoptStranger(pid) }
        let lines = r.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(lines.count, 1, r.out)
        let event = try XCTUnwrap(lines.last)
        XCTAssertEqual(event["event"] as? String, "accepted", r.out)
        XCTAssertFalse(r.out.contains("\"done\""), "nothing is done yet: \(r.out)")
        let id = try XCTUnwrap(event["requestId"] as? String)
        let spoolFiles = (FileManager.default.enumerator(atPath: spool.path)?.allObjects as? [String]) ?? []
        XCTAssertTrue(spoolFiles.contains { $0.contains(id) }, "the id names the spool request \(id): \(spoolFiles)")
        XCTAssertEqual(try run(["wait", repo, "--cache-base", cacheBase.path, "--timeout", "60"]).status, 0)
    }

    func testCtrlCPipedWithoutCacheDirNamesTheRealDirectory() throws {
        try makeRepo(size: 8 << 20)
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: "\(repo)/\(big)")
        let (p, _, err) = try speech(["download", repo, "--cache-base", cacheBase.path])
        let staging = modelDir(repo).appendingPathComponent(".incomplete").path
        XCTAssertTrue(waitUntil(timeout: 30) { self.hub.bodyBytes(for: "\(self.repo)/\(self.big)") > 0 }, "the transfer started")
        kill(p.processIdentifier, SIGINT)
        XCTAssertTrue(waitForExit(p, timeout: 30))
        XCTAssertEqual(p.terminationStatus, 130, contents(err))
        XCTAssertTrue(contents(err).contains("kept under \(staging)"), contents(err))
        XCTAssertFalse(contents(err).contains("the model directory"), contents(err))
    }

    func testAnIncludeThatMatchesNothingWarnsNamingThePatternAndNearPaths() throws {
        try makeRepo()
        let r = try run(["download", repo, "--include", "*.gguf", "--include", "config.json", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.err.contains("warning: --include '*.gguf' matches no file of \(repo)"), r.err)
        XCTAssertTrue(r.err.contains("did you mean"), r.err)
        XCTAssertTrue(r.err.contains("*.bin") || r.err.contains("*.json"), r.err)
        let typo = try run(["download", repo, "--include", "weights/weight.bim*", "--cache-base", cacheBase.path, "--json"])
        XCTAssertEqual(typo.status, 0, typo.err)
        XCTAssertTrue(typo.err.contains("weights/weight.bin"), "the nearest path first: \(typo.err)")
        XCTAssertTrue(typo.out.contains("\"unmatchedPatterns\""), typo.out)
    }

    func testACatalogMissNamesTheEndpointAndTheMirrorFirst() throws {
        try TestHub.writeRepo(root: root, repo: "aufklarer/Kokoro-82M-CoreML", files: ["config.json": Data("{}".utf8)])
        let r = try run(["download", "kokoro", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.hasPrefix("speech: \(hub.baseURL) (HF_ENDPOINT) has no file"), r.err)
        XCTAssertTrue(r.err.contains("a mirror may lack the repo"), r.err)
        let mirror = try XCTUnwrap(r.err.range(of: "mirror")).lowerBound
        let catalog = try XCTUnwrap(r.err.range(of: "catalog entry is out of date")).lowerBound
        XCTAssertLessThan(mirror, catalog, "the mirror is named before the catalog: \(r.err)")
    }

    func testCacheRmDuringAnEmbeddedDownloadSaysWhatWorks() throws {
        try makeRepo(size: 8 << 20)
        hub.setFault(.rateLimit(bytesPerSecond: 512 << 10), for: "\(repo)/\(big)")
        let (p, _, _) = try speech(["download", repo, "--cache-base", cacheBase.path])
        XCTAssertTrue(waitUntil(timeout: 30) { self.hub.bodyBytes(for: "\(self.repo)/\(self.big)") > 0 }, "the transfer started")
        let r = try run(["cache", "rm", repo, "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("pid \(p.processIdentifier)"), r.err)
        XCTAssertTrue(r.err.contains("kill \(p.processIdentifier)"), r.err)
        XCTAssertFalse(r.err.contains("(`speech wait \(repo)"), "wait and cancel see no request, so they are not suggested: \(r.err)")
        XCTAssertTrue(r.err.contains("not speech-fetchd's"), r.err)
        kill(p.processIdentifier, SIGINT)
        XCTAssertTrue(waitForExit(p, timeout: 30))
    }

    func testJSONKeepsSlashesAndEnvGivesValueAndSourceApart() throws {
        try makeRepo()
        let r = try run(["download", repo, "config.json", "--cache-base", cacheBase.path, "--json"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertFalse(r.out.contains("\\/"), r.out)
        XCTAssertTrue(r.out.contains("\"directory\":\"\(modelDir(repo).path)\""), r.out)
        let hfCache = temp.appendingPathComponent("hf-hub").path
        let env = try run(["env", "--json"], extra: ["QWEN3_CACHE_DIR": cacheBase.path, "HF_HUB_CACHE": hfCache, "HF_TOKEN": "hf_x"])
        XCTAssertEqual(env.status, 0, env.err)
        XCTAssertFalse(env.out.contains("\\/"), env.out)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(env.out.utf8)) as? [String: Any])
        XCTAssertEqual(object["cache_base"] as? String, cacheBase.path)
        XCTAssertEqual(object["cache_base_source"] as? String, "QWEN3_CACHE_DIR")
        XCTAssertEqual(object["endpoint"] as? String, hub.baseURL)
        XCTAssertEqual(object["endpoint_source"] as? String, "HF_ENDPOINT")
        XCTAssertEqual(object["hf_cache"] as? String, hfCache)
        XCTAssertEqual(object["hf_cache_source"] as? String, "HF_HUB_CACHE")
        XCTAssertEqual(object["token_source"] as? String, "HF_TOKEN")
        XCTAssertNotNil(object["version"] as? String)
        let text = try run(["env"], extra: ["QWEN3_CACHE_DIR": cacheBase.path, "HF_HUB_CACHE": hfCache])
        XCTAssertTrue(text.out.contains("hf cache "), text.out)
        XCTAssertTrue(text.out.contains("\(hfCache) (HF_HUB_CACHE)"), text.out)
        XCTAssertTrue(text.out.hasPrefix("version "), text.out)
        XCTAssertTrue(text.out.contains("\(cacheBase.path) (QWEN3_CACHE_DIR)"), text.out)
    }
}
