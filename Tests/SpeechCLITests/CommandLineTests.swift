// The speech, speech-fetchd and speech-testhub executables as a user meets them: help, versions,
// refused arguments, file names, --exclude, --dry-run, --quiet, piped progress, --json, env,
// messages and exit codes. Real processes against the test Hub; terminals through script(1).
import Foundation
import TestHub
@testable import TestSupport
import XCTest

final class CommandLineTests: DaemonTestCase {
    let repo = "org/Kokoro"

    func makeRepo(big: Int = 3 << 20) throws {
        try TestHub.generateRepo(root: root, repo: repo, files: ["weights/weight.bin": big, "voices/af_heart.json": 10_240])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{\"a\": 1}".utf8),
                                                              "README.md": Data("# Kokoro\n".utf8)])
    }

    /// Runs a program to its end: stdout, stderr and the exit status.
    @discardableResult
    func run(_ arguments: [String], program: String = "speech", extra: [String: String] = [:],
             environment env: [String: String]? = nil) -> (out: String, err: String, status: Int32) {
        let binary = program.hasPrefix("/") ? URL(fileURLWithPath: program) : speechBinary.deletingLastPathComponent().appendingPathComponent(program)
        guard let (p, out, err) = try? launch(binary, arguments, environment: env ?? environment(extra: extra), hint: program) else {
            XCTFail("cannot start \(program)")
            return ("", "", -1)
        }
        p.waitUntilExit()
        return (contents(out), contents(err), p.terminationStatus)
    }

    // MARK: Help, version, refused arguments

    static let commands: [[String]] = [
        ["download"], ["models"], ["wait"], ["status"], ["cancel"], ["resolve"], ["demo"], ["env"],
        ["cache"], ["cache", "ls"], ["cache", "verify"], ["cache", "rm"], ["cache", "clean"], ["cache", "prune"], ["cache", "pin"], ["cache", "unpin"], ["cache", "import-hf"],
    ]

    func testEveryProgramAndSubcommandPrintsHelpToStdoutAndExitsZero() {
        for words in Self.commands {
            for flag in ["--help", "-h"] {
                let r = run(words + [flag])
                XCTAssertEqual(r.status, 0, "speech \(words) \(flag): \(r.err)")
                XCTAssertTrue(r.out.hasPrefix("usage: speech \(words.joined(separator: " "))"), "speech \(words) \(flag): \(r.out)")
                XCTAssertTrue(r.err.isEmpty, r.err)
            }
        }
        for program in ["speech", "speech-fetchd", "speech-testhub"] {
            let r = run(["--help"], program: program)
            XCTAssertEqual(r.status, 0, "\(program) --help: \(r.err)")
            XCTAssertTrue(r.out.hasPrefix("usage: \(program)"), r.out)
        }
    }

    func testSpeechHelpAndTheManPageListEveryCacheCommand() {
        let cacheUsage = run(["cache", "--help"]).out.split(separator: "\n").first.map(String.init) ?? ""
        guard let open = cacheUsage.firstIndex(of: "<"), let close = cacheUsage.firstIndex(of: ">") else {
            return XCTFail("no <commands> in \(cacheUsage)")
        }
        let commands = cacheUsage[cacheUsage.index(after: open)..<close].split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertTrue(commands.contains("prune") && commands.contains("pin") && commands.contains("unpin"), cacheUsage)
        let help = run(["--help"]).out
        XCTAssertTrue(help.contains("cache " + commands.joined(separator: " | ")), "speech --help lists every cache command:\n\(help)")
        // The man page the package installs, made from the same helps.
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../scripts/man-page").standardized
        let binDir = speechBinary.deletingLastPathComponent().path
        let man = run([script.path, "speech", "1", "speech models", binDir], program: "/usr/bin/python3")
        XCTAssertEqual(man.status, 0, man.err)
        for command in commands { XCTAssertTrue(man.out.contains("speech cache \(command)".replacingOccurrences(of: "-", with: "\\-")), "the man page has speech cache \(command)") }
    }

    func testVersionNamesTheReleaseTheCommitAndLibcurl() {
        for words in [["speech", "--version"], ["speech", "download", "--version"], ["speech-fetchd", "--version"],
                      ["speech-testhub", "--version"]] {
            let r = run(Array(words.dropFirst()), program: words[0])
            XCTAssertEqual(r.status, 0, "\(words): \(r.err)")
            let lines = r.out.split(separator: "\n")
            XCTAssertEqual(lines.count, 3, r.out)
            XCTAssertTrue(lines.first?.hasPrefix("\(words[0]) ") ?? false, r.out)
            XCTAssertTrue(lines.contains { $0.hasPrefix("commit ") }, r.out)
            XCTAssertTrue(lines.contains { $0.hasPrefix("libcurl libcurl/") }, r.out)
        }
    }

    func testACopiedBinaryReportsTheCommitItWasBuiltFrom() throws {
        // Copied out of the checkout into a folder whose own `.git` names another commit (the
        // old run-time look would report that one, or "unknown" with no `.git` at all): the
        // commit was recorded when the binary was built.
        let elsewhere = temp.appendingPathComponent("copied")
        let fakeGit = elsewhere.appendingPathComponent(".git")
        try FileManager.default.createDirectory(at: fakeGit, withIntermediateDirectories: true)
        try Data((String(repeating: "0", count: 40) + "\n").utf8).write(to: fakeGit.appendingPathComponent("HEAD"))
        let bin = elsewhere.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for program in ["speech", "speech-fetchd"] {
            let built = run(["--version"], program: program)
            let builtCommit = built.out.split(separator: "\n").first { $0.hasPrefix("commit ") }
            let commit = try XCTUnwrap(builtCommit.map { String($0.dropFirst(7)) }, built.out)
            XCTAssertTrue(commit.range(of: "^[0-9a-f]{40}(\\+dirty)?$", options: .regularExpression) != nil,
                          "a build in this checkout records its commit: \(built.out)")
            let copy = bin.appendingPathComponent(program)
            try FileManager.default.copyItem(at: speechBinary.deletingLastPathComponent().appendingPathComponent(program), to: copy)
            let copied = run(["--version"], program: copy.path)
            XCTAssertEqual(copied.status, 0, copied.err)
            XCTAssertTrue(copied.out.contains("\ncommit \(commit)\n"), "\(program) copied elsewhere still reports \(commit): \(copied.out)")
        }
    }

    func testUnknownFlagsAndExtraArgumentsAreRefusedWithExit64AndOneLine() {
        let cases: [[String]] = [
            ["download", "org/x", "-x"], ["download", "org/x", "--frob"], ["models", "extra"], ["status", "-q"],
            ["wait", "org/x", "org/y"], ["resolve", "org/x", "more"], ["demo", "--size", "10M", "extra"],
            ["cache", "ls", "extra"], ["cache", "frobnicate"], ["frobnicate"], ["download"],
            ["download", "kokoro", "config.json"], ["download", "not/a/repo"], ["download", "nomodel"],
            ["download", "org/x", "--cache-dir", "A", "--cache-base", "B"],
        ]
        for words in cases {
            let r = run(words)
            XCTAssertEqual(r.status, 64, "speech \(words): \(r.err)")
            XCTAssertEqual(r.err.split(separator: "\n").count, 1, "one line for speech \(words): \(r.err)")
            XCTAssertTrue(r.out.isEmpty, r.out)
        }
        let both = run(["download", "org/x", "--cache-dir", "A", "--cache-base", "B"])
        XCTAssertTrue(both.err.contains("--cache-dir DIR") && both.err.contains("--cache-base DIR"), "in the command line's words: \(both.err)")
        XCTAssertFalse(both.err.contains("cacheBaseDir"), both.err)
        XCTAssertEqual(run(["--cache-base", cacheBase.path, "extra"], program: "speech-fetchd").status, 64)
        XCTAssertEqual(run(["-x"], program: "speech-fetchd").status, 64)
        XCTAssertEqual(run(["--root", root.path, "--nope"], program: "speech-testhub").status, 64)
    }

    // MARK: What download fetches

    func testPositionalFileNamesFetchOnlyThoseFiles() throws {
        try makeRepo()
        let r = run(["download", repo, "config.json", "voices/af_heart.json", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(finalExists(repo, "config.json"))
        XCTAssertTrue(finalExists(repo, "voices/af_heart.json"))
        XCTAssertFalse(finalExists(repo, "weights/weight.bin"), "a file not named is not fetched")
        XCTAssertFalse(finalExists(repo, "README.md"))
    }

    func testExcludeLeavesMatchingFilesOut() throws {
        try makeRepo()
        let r = run(["download", repo, "--exclude", "weights/*", "--exclude", "*.md", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(finalExists(repo, "config.json"))
        XCTAssertFalse(finalExists(repo, "weights/weight.bin"))
        XCTAssertFalse(finalExists(repo, "README.md"))
    }

    func testDryRunListsSizesAndWritesNothing() throws {
        try makeRepo()
        let r = run(["download", repo, "--dry-run", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("3.0 MiB  fetch   weights/weight.bin"), r.out)
        XCTAssertTrue(r.out.contains("would fetch 4 of 4 files"), r.out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).path), "nothing written")
        XCTAssertEqual(hub.bodyBytes(for: "\(repo)/weights/weight.bin"), 0, "no file body was asked for")
        let json = run(["download", repo, "--dry-run", "--json", "--cache-base", cacheBase.path])
        let plan = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any]
        XCTAssertEqual(plan?["bytesToFetch"] as? Int, (3 << 20) + 10_240 + 8 + 9, json.out)
    }

    func testQuietPrintsNothingButTheDirectoryAndDisabledBarsPrintNoProgress() throws {
        try makeRepo()
        let quiet = run(["download", repo, "config.json", "-q", "--cache-base", cacheBase.path])
        XCTAssertEqual(quiet.status, 0, quiet.err)
        XCTAssertEqual(quiet.out, modelDir(repo).path + "\n")
        XCTAssertEqual(quiet.err, "", "--quiet: no summary on stderr")
        let plain = run(["download", repo, "voices/af_heart.json", "--cache-base", cacheBase.path],
                        extra: ["HF_HUB_DISABLE_PROGRESS_BARS": "1"])
        XCTAssertEqual(plain.status, 0, plain.err)
        XCTAssertEqual(plain.out, modelDir(repo).path + "\n", "stdout is the directory alone")
        XCTAssertFalse(plain.err.contains("done voices"), "no progress lines: \(plain.err)")
        XCTAssertTrue(plain.err.contains("\(repo): 1 file in"), "the summary, on stderr: \(plain.err)")
    }

    func testPipedDownloadPrintsProgressLinesWhileAFileIsInFlightAndTheAverageRateAtTheEnd() throws {
        try makeRepo(big: 2 << 20)
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: "\(repo)/weights/weight.bin")  // ~0.5 s per range
        let r = run(["download", repo, "weights/weight.bin", "--cache-base", cacheBase.path],
                    extra: ["SPEECH_FETCH_PROGRESS_INTERVAL": "0.2", "HF_DOWNLOAD_RANGE_CONCURRENCY": "1"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, modelDir(repo).path + "\n", "progress goes to stderr, as hf's bars; stdout is the directory")
        let lines = r.err.split(separator: "\n")
        let progress = lines.filter { $0.contains("% ") && $0.contains("/s, 0/1 files") }
        XCTAssertGreaterThanOrEqual(progress.count, 2, "progress lines before the file finished:\n\(r.err)")
        guard let last = lines.last, let range = last.range(of: #"([0-9.]+) (KiB|MiB)/s average"#, options: .regularExpression) else {
            return XCTFail("the final line gives the average rate: \(r.err)")
        }
        let figure = last[range].split(separator: " ")
        let rate = (Double(figure[0]) ?? 0) * (figure[1] == "MiB" ? 1024 : 1)
        XCTAssertGreaterThan(rate, 100, "KiB/s: \(last)")
        XCTAssertLessThan(rate, 2 * 1024, "the average, not a burst: \(last)")
    }

    // MARK: On a terminal

    /// Runs speech under script(1), in a real pseudo-terminal; returns what the terminal got.
    func runInTerminal(_ arguments: [String], extra: [String: String] = [:]) -> (screen: String, status: Int32) {
        let command = ([speechBinary.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let r = run(["-q", "-e", "-c", command, "/dev/null"], program: "/usr/bin/script", extra: extra)
        return (r.out, r.status)
    }

    /// The redrawn bar's frames: the pieces between carriage returns that show a rate.
    func frames(_ screen: String) -> [String] {
        screen.split(whereSeparator: { $0 == "\r" || $0 == "\n" }).map(String.init).filter { $0.contains("/s  ETA") }
    }

    func testDaemonServedDownloadRedrawsItsLineWithATrueRateOnATerminal() throws {
        try makeRepo(big: 2 << 20)
        hub.setFault(.rateLimit(bytesPerSecond: 1 << 20), for: "\(repo)/weights/weight.bin")  // 2 workers: ~1 s
        try startDaemon(workers: 2, slots: 1)
        let r = runInTerminal(["download", repo, "weights/weight.bin", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 0, r.screen)
        XCTAssertTrue(r.screen.contains("\r"), "the line is redrawn in place: \(r.screen.debugDescription)")
        let shown = frames(r.screen)
        XCTAssertGreaterThanOrEqual(shown.count, 2, r.screen.debugDescription)
        let moving = shown.filter { !$0.contains(" 0 B/s ") && !$0.contains("ETA --") }
        XCTAssertFalse(moving.isEmpty, "a rate above 0 and an ETA while the daemon fetches: \(shown)")
    }

    // MARK: Retries

    func testEveryRetryPrintsOneLineWithinASecondOfTheFailure() throws {
        try makeRepo()
        let file = "\(repo)/config.json"
        hub.setFault(.status(code: 503, times: 2, retryAfter: nil), for: file)
        let failures = StampedLines()
        hub.observeRequests { line, _ in if line.contains("config.json") { failures.add(line) } }
        let (p, lines) = try speechStamped(["download", repo, "config.json", "--cache-base", cacheBase.path],
                                           extra: ["SPEECH_FETCH_RETRY_DELAYS": "2"], following: .standardError)
        XCTAssertTrue(waitForExit(p, timeout: 30))
        XCTAssertEqual(p.terminationStatus, 0, lines.all.map(\.text).joined(separator: "\n"))
        let retries = lines.all.filter { $0.text.contains("retrying") }
        XCTAssertEqual(retries.count, 2, "one line per retry: \(lines.all.map(\.text))")
        XCTAssertTrue(retries.first?.text.contains("HTTP 503") ?? false, "\(retries)")
        XCTAssertFalse(retries.first?.text.contains("nothing answered") ?? true, "a 503 is an answer: \(retries)")
        XCTAssertTrue(retries.first?.text.contains("attempt 2 of 5 in 2.0 s") ?? false, "\(retries)")
        XCTAssertTrue(retries.last?.text.contains("attempt 3 of 5") ?? false, "\(retries)")
        guard let failed = failures.all.first, let line = retries.first else { return XCTFail("no failure seen") }
        let gap = line.time.timeIntervalSince(failed.time)
        print("retry line \(String(format: "%.3f", gap)) s after the first failed request")
        XCTAssertLessThan(gap, 1.0, "the retry line comes at once, not after the 2 s wait")
    }

    func testJSONEmitsRetryEvents() throws {
        try makeRepo()
        hub.setFault(.status(code: 503, times: 1, retryAfter: nil), for: "\(repo)/config.json")
        let r = run(["download", repo, "config.json", "--json", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 0, r.err)
        let events = r.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let retry = events.first { $0["event"] as? String == "retry" }
        XCTAssertEqual(retry?["attempt"] as? Int, 2, r.out)
        XCTAssertEqual(retry?["attempts"] as? Int, 5, r.out)
        XCTAssertEqual(retry?["subject"] as? String, "config.json", r.out)
    }

    /// Every `--json` line of a download (a plan, progress, a retry, a done with an unmatched
    /// pattern, an error) is an event docs/cli.md's table lists, with its fields and no others.
    func testEveryJSONEventIsOneTheSchemaInDocsCLIListsWithItsFields() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/cli.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let section = try XCTUnwrap(text.components(separatedBy: "### --json events").dropFirst().first?.components(separatedBy: "\n## ").first)
        func names(_ cell: Substring) -> Set<String> {
            Set(cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
        }
        // Per row: the event, its fields (outside parentheses: required), and every name it allows.
        var rows: [(event: String, required: Set<String>, allowed: Set<String>)] = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 5, let event = names(Substring(cells[1])).first else { continue }
            let topLevel = cells[2].replacingOccurrences(of: "\\([^)]*\\)", with: "", options: .regularExpression)
            rows.append((event, names(Substring(topLevel)).union(["event"]), names(Substring(cells[2])).union(names(Substring(cells[3]))).union(["event"])))
        }
        XCTAssertGreaterThanOrEqual(rows.count, 12, "the table of docs/cli.md: \(rows)")

        try makeRepo()
        hub.setFault(.status(code: 503, times: 1, retryAfter: nil), for: "\(repo)/config.json")
        var lines: [Substring] = []
        for words in [["--dry-run"], ["--include", "*.nomatch", "--include", "*"], []] {
            let r = run(["download", repo, "--json", "--cache-base", cacheBase.path] + words)
            XCTAssertEqual(r.status, 0, r.err)
            lines += r.out.split(separator: "\n")
        }
        let failed = run(["download", "org/Absent", "--json", "--offline", "--cache-base", cacheBase.path])
        XCTAssertEqual(failed.status, 1, failed.err)
        lines += failed.out.split(separator: "\n")
        var seen = Set<String>()
        for line in lines {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], String(line))
            let event = try XCTUnwrap(object["event"] as? String, String(line))
            let keys = Set(object.keys)
            XCTAssertTrue(rows.contains { $0.event == event && $0.required.isSubset(of: keys) && keys.isSubset(of: $0.allowed) },
                          "not as docs/cli.md lists it: \(line)")
            XCTAssertFalse(object.values.contains { $0 is NSNull }, "no null: \(line)")
            seen.insert(event)
        }
        XCTAssertEqual(seen, ["plan", "progress", "file", "retry", "done", "error"], "\(lines)")
    }

    func testNothingThereOnAColdCacheFailsAtOnceNamingTheEndpointAndOfflineMode() throws {
        // A refused connection (port 1 of loopback) and a name that never resolves (RFC 2606),
        // under the user's ladder of 5 attempts seconds apart: no network, nothing cached.
        for endpoint in ["http://127.0.0.1:1", "http://hub.invalid"] {
            let dead = ["HF_ENDPOINT": endpoint, "SPEECH_FETCH_RETRY_ATTEMPTS": "5", "SPEECH_FETCH_RETRY_DELAYS": "5"]
            for words in [["download", "org/x", "--cache-base", cacheBase.path], ["resolve", "org/x"]] {
                let started = Date()
                let r = run(words, extra: dead)
                let took = Date().timeIntervalSince(started)
                print("\(words[0]) with \(endpoint): failed in \(String(format: "%.2f", took)) s")
                XCTAssertEqual(r.status, 1, r.err)
                XCTAssertLessThan(took, 4, "\(words[0]) \(endpoint): fails without the retry ladder:\n\(r.err)")
                XCTAssertFalse(r.err.contains("retrying"), r.err)
                XCTAssertTrue(r.err.contains(endpoint), "names the endpoint: \(r.err)")
                if words[0] == "download" {
                    XCTAssertTrue(r.err.contains("HF_HUB_OFFLINE") && r.err.contains("--offline") && r.err.contains("HF_ENDPOINT"), r.err)
                }
            }
        }
    }

    func testAServerErrorAtFirstContactKeepsTheLadder() throws {
        try makeRepo()
        hub.setFault(.status(code: 503, times: 2, retryAfter: nil), for: "\(repo)/@api")
        let r = run(["download", repo, "config.json", "--cache-base", cacheBase.path], extra: ["SPEECH_FETCH_RETRY_DELAYS": "0.05"])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.err.split(separator: "\n").filter { $0.contains("retrying") && $0.contains("HTTP 503") }.count, 2, r.err)
    }

    func testAConnectionThatBreaksOffMidBodyKeepsTheLadderAndIsNotCalledUnreachable() throws {
        // The CDN answered and sent 100 KB, then closed: the Hub was reached. The retry line
        // says the connection broke off, not that the Hub could not be reached.
        try makeRepo()
        hub.setFault(.dropConnection(afterBytes: 100_000, times: 1), for: "\(repo)/weights/weight.bin")
        let r = run(["download", repo, "--cache-base", cacheBase.path], extra: ["SPEECH_FETCH_RETRY_DELAYS": "0.05"])
        XCTAssertEqual(r.status, 0, r.err)
        let retries = r.err.split(separator: "\n").filter { $0.contains("retrying") }
        XCTAssertEqual(retries.count, 1, r.err)
        XCTAssertFalse(retries.contains { $0.contains("could not reach") }, r.err)
        XCTAssertTrue(retries.contains { $0.contains("the connection broke off") }, r.err)
    }

    func testResolveHonoursTheRetrySettingsAndWarnsOfABadEndpoint() throws {
        let warned = run(["resolve", "org/x"], extra: ["HF_ENDPOINT": "ftp://nowhere", "https_proxy": "http://127.0.0.1:1",
                                                      "SPEECH_FETCH_RETRY_ATTEMPTS": "1"])
        XCTAssertTrue(warned.err.contains("warning: HF_ENDPOINT=ftp://nowhere is not a full http(s)://host URL"), warned.err)
    }

    // MARK: --json and env

    func testJSONOnModelsCacheLsStatusAndResolve() throws {
        try makeRepo()
        XCTAssertEqual(run(["download", repo, "config.json", "--cache-base", cacheBase.path]).status, 0)
        for words in [["models", "--json"], ["cache", "ls", "--json"]] {
            let r = run(words + ["--cache-base", cacheBase.path])
            XCTAssertEqual(r.status, 0, r.err)
            for line in r.out.split(separator: "\n") {
                XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(words): \(line)")
            }
            XCTAssertFalse(r.out.isEmpty)
        }
        let ls = run(["cache", "ls", "--json", "--cache-base", cacheBase.path])
        XCTAssertTrue(ls.out.contains("\"repo\":\"org/Kokoro\""), "a slash stays a slash: \(ls.out)")
        let status = run(["status", "--json", "--cache-base", cacheBase.path])
        let object = try JSONSerialization.jsonObject(with: Data(status.out.utf8)) as? [String: Any]
        XCTAssertNotNil(object?["requests"], status.out)
        let resolve = run(["resolve", repo, "--json"])
        let tree = try JSONSerialization.jsonObject(with: Data(resolve.out.utf8)) as? [String: Any]
        XCTAssertEqual((tree?["files"] as? [Any])?.count, 4, resolve.out)
        XCTAssertEqual((tree?["commit"] as? String)?.count, 40, resolve.out)
    }

    func testEnvReportsWhereTheTokenComesFromButNeverTheToken() {
        let r = run(["env", "--cache-base", cacheBase.path], extra: ["HF_TOKEN": "hf_secret_value", "https_proxy": "http://user:pw@proxy.example:3128"])
        XCTAssertEqual(r.status, 0, r.err)
        for key in ["endpoint", "token", "cache base", "spool", "daemon", "libcurl", "proxy", "kernel", "inotify"] {
            XCTAssertTrue(r.out.contains("\n\(key) ") || r.out.hasPrefix("\(key) "), "\(key) in:\n\(r.out)")
        }
        XCTAssertTrue(r.out.contains("from HF_TOKEN"), r.out)
        XCTAssertFalse(r.out.contains("hf_secret_value"), "never the token")
        XCTAssertFalse(r.out.contains("pw@"), "never a proxy password")
        XCTAssertTrue(r.out.contains(hub.baseURL), r.out)
    }

    // MARK: Messages

    func testOfflineMissListsExactlyTheMissingFilesAndHowToGoOnline() throws {
        try makeRepo()
        XCTAssertEqual(run(["download", repo, "voices/af_heart.json", "--cache-base", cacheBase.path]).status, 0)
        let r = run(["download", repo, "--include", "voices/af_heart.json", "--include", "nope.json", "--offline",
                     "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("missing: nope.json;"), r.err)
        XCTAssertFalse(r.err.contains("af_heart"), "a file on disk is not missing: \(r.err)")
        XCTAssertTrue(r.err.contains("drop --offline"), r.err)
        let empty = run(["download", "org/Other", "--cache-base", cacheBase.path], extra: ["HF_HUB_OFFLINE": "1"])
        XCTAssertEqual(empty.status, 1)
        XCTAssertTrue(empty.err.contains("unset HF_HUB_OFFLINE"), empty.err)
        XCTAssertFalse(empty.err.contains("(any file)"), empty.err)
    }

    func testCatalogDownloadsNeverBlameInclude() throws {
        // The catalog's Kokoro names files this repo lacks.
        try TestHub.writeRepo(root: root, repo: "aufklarer/Kokoro-82M-CoreML", files: ["config.json": Data("{}".utf8)])
        let r = run(["download", "kokoro", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertFalse(r.err.contains("--include"), "no --include was given: \(r.err)")
        XCTAssertTrue(r.err.contains("catalog"), r.err)
    }

    func testSuggestedCommandsRepeatTheCacheBaseGiven() throws {
        try makeRepo()
        XCTAssertEqual(run(["download", repo, "--cache-base", cacheBase.path]).status, 0)
        let weights = modelDir(repo).appendingPathComponent("weights/weight.bin")
        let handle = try FileHandle(forWritingTo: weights)
        try handle.seek(toOffset: 1000)
        handle.write(Data([0x55, 0xAA, 0x55]))
        try handle.close()
        let r = run(["cache", "verify", "--cache-base", cacheBase.path])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        XCTAssertTrue(r.out.contains("`speech cache verify \(repo) --fix --cache-base \(cacheBase.path)`"), r.out)
    }

    func testNoFoundationErrorTextReachesTheUser() throws {
        try makeRepo()
        let r = run(["download", repo, "config.json", "--cache-base", "/proc/nope"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertFalse(r.err.contains("Domain="), r.err)
        XCTAssertFalse(r.err.contains("NSCocoaErrorDomain"), r.err)
        XCTAssertTrue(r.err.contains("/proc/nope"), r.err)
    }

    func testProxyFailuresNameTheProxy() throws {
        let proxy = try BadGatewayProxy()
        defer { proxy.stop() }
        let r = run(["resolve", "org/Any"], extra: ["HF_ENDPOINT": "http://hub.invalid", "http_proxy": proxy.url,
                                                    "SPEECH_FETCH_RETRY_ATTEMPTS": "1"])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("HTTP 502 through the proxy \(proxy.url)"), r.err)
    }
}

/// A loopback "proxy" that answers every request with 502 Bad Gateway.
final class BadGatewayProxy: @unchecked Sendable {
    let fd: Int32
    let url: String
    private let stopped = NSLock()

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0, listen(fd, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        url = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        let listener = fd
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(client, &buffer, buffer.count)
                let answer = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                _ = answer.withCString { write(client, $0, strlen($0)) }
                close(client)
            }
        }
    }

    func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}

extension CommandLineTests {
    // MARK: Names, settings and selections a user can get wrong

    func testResolveAndDryRunShowAFileNamesTerminalEscapesEscaped() throws {
        let red = "red\u{1B}[31m.txt", title = "title\u{1B}]0;pwned\u{07}.json"
        try TestHub.writeRepo(root: root, repo: repo, files: [red: Data("r\n".utf8), title: Data("{}\n".utf8)])
        for words in [["resolve", repo], ["download", repo, "--dry-run", "--cache-base", cacheBase.path]] {
            let r = run(words)
            XCTAssertEqual(r.status, 0, "\(words): \(r.err)")
            XCTAssertFalse(r.out.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(words) prints no control character: \(Array(r.out.utf8))")
            XCTAssertTrue(r.out.contains("red\\x1B[31m.txt"), "\(words): \(r.out)")
            XCTAssertTrue(r.out.contains("title\\x1B]0;pwned\\x07.json"), "\(words): \(r.out)")
        }
        // --json carries the names as they are (JSON escapes them itself).
        let json = run(["resolve", repo, "--json"])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        let paths = (object["files"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        XCTAssertTrue(paths.contains { $0.unicodeScalars.elementsEqual(red.unicodeScalars) }, "\(paths)")
    }

    func testAnUnreadableMaxRateVariableFailsTheCallNamingIt() throws {
        try makeRepo()
        let r = run(["download", repo, "--cache-base", cacheBase.path], extra: ["SPEECH_FETCH_MAX_RATE": "20MB"])
        XCTAssertEqual(r.status, 64, r.err)
        XCTAssertTrue(r.err.contains("SPEECH_FETCH_MAX_RATE='20MB'") && r.err.contains("like 500K or 20M"), r.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: modelDir(repo).path), "nothing was fetched")
        // The flag replaces the variable: the call goes on with the flag's cap.
        let flagged = run(["download", repo, "--cache-base", cacheBase.path, "--max-rate", "100M"], extra: ["SPEECH_FETCH_MAX_RATE": "20MB"])
        XCTAssertEqual(flagged.status, 0, flagged.err)
    }

    func testAnIncludeThatMatchesNoFileOfTheListingIsTheSameWarningOnlineAndOffline() throws {
        try makeRepo()
        let warning = "--include '*.gguf' matches no file of \(repo); nothing was fetched for it"
        // Online.
        let online = run(["download", repo, "--cache-base", cacheBase.path, "--include", "*.gguf", "--include", "config.json"])
        XCTAssertEqual(online.status, 0, online.err)
        XCTAssertTrue(online.err.contains(warning), online.err)
        // Offline, with the manifest the online call wrote.
        let withManifest = run(["download", repo, "--cache-base", cacheBase.path, "--offline", "--include", "*.gguf", "--include", "config.json"])
        XCTAssertEqual(withManifest.status, 0, withManifest.err)
        XCTAssertTrue(withManifest.err.contains(warning), "offline with a manifest: \(withManifest.err)")
        // Offline in a folder without a manifest (an app's bundle) there is no listing to judge
        // the glob by: matching no file on disk, it may name files never fetched, a miss
        // (OfflineTests.testOfflineBundleWithoutManifestIsJudgedByItsFiles pins the same).
        let bundle = temp.appendingPathComponent("bundle")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try Data("{\"a\": 1}".utf8).write(to: bundle.appendingPathComponent("config.json"))
        let withoutManifest = run(["download", repo, "--cache-dir", bundle.path, "--offline", "--include", "*.gguf", "--include", "config.json"])
        XCTAssertEqual(withoutManifest.status, 1, "offline without a manifest: \(withoutManifest.err)")
        XCTAssertTrue(withoutManifest.err.contains("*.gguf"), "the miss names the glob: \(withoutManifest.err)")
    }
}
