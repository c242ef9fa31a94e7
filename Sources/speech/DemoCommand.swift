// DemoCommand - `speech demo`: the test Hub beside speech on loopback (DemoHub) and one download
// from it with progress, then the scratch folder removed.
import CommandLineKit
import Foundation

enum DemoCommand {
    static let spec = CommandSpec(
        name: "speech demo",
        summary: """
        Start the test Hub (the speech-testhub beside speech) on loopback with a sharded demo
        repo and download it with progress into a fresh /tmp/speech-demo-<pid>/cache, which is
        removed when the demo ends (also on Ctrl-C); --cache-base DIR keeps the model in DIR.
        """,
        options: [
            .value("size", "BYTES", "bytes of shards (default 268435456; K, M, G suffixes taken)"),
            CacheCommand.baseOption,
            .flag("json", "JSON events, as speech download --json"),
            .flag("quiet", short: "q", "print only the model directory"),
        ])

    /// `speech demo`: a test Hub on loopback with a sharded demo repo, and one download from it.
    /// The Hub is the `speech-testhub` beside this program, run as a child process, so that
    /// `speech` does not link the test Hub (docs/startup.md).
    static func run(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(spec, words)
        var size = 256 << 20
        if let raw = parsed.value("size") {
            guard let bytes = parseSize(raw), bytes > 0 else {
                speechProgram.usageError("speech demo: --size takes a byte count such as 10M or 1G, not '\(raw)'", help: spec.name)
            }
            size = bytes
        }
        let testhub = siblingExecutable("speech-testhub")
        guard FileManager.default.isExecutableFile(atPath: testhub) else {
            speechProgram.fail("demo: no speech-testhub beside speech (looked for \(testhub)); `bin/speech demo` builds both, "
                               + "or build it with `swift build -c release --static-swift-stdlib --product speech-testhub`")
        }
        let temp = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("speech-demo-\(getpid())")
        let root = temp.appendingPathComponent("hub")
        let log = temp.appendingPathComponent("testhub.log")
        let base = parsed.value("cache-base") ?? temp.appendingPathComponent("cache").path
        // Whatever ends the demo (its end, a failure, Ctrl-C: every exit path runs atexit), the
        // scratch folder goes, with the model when the cache is in it.
        demoScratch = temp.path
        atexit { if let scratch = demoScratch { removeDemoScratch(scratch) } }
        let hub: DemoHub
        do {
            hub = try DemoHub.start(testhub, root: root, size: size, log: log)
        } catch {
            removeScratch(root: root, log: log)
            speechProgram.fail("demo failed: \(error)")
        }
        if !parsed.flag("quiet") && !parsed.flag("json") {
            emit("test Hub at \(hub.baseURL); downloading \(DemoHub.repo) into \(base)\n")
        }
        var env = ProcessInfo.processInfo.environment
        env["HF_ENDPOINT"] = hub.baseURL
        env["HF_HUB_OFFLINE"] = nil
        var request = DownloadCommand.Request(repo: DemoHub.repo)
        request.cacheBase = base
        request.json = parsed.flag("json")
        request.quiet = parsed.flag("quiet")
        let code = DownloadCommand.download(request, environment: env)
        hub.stop()
        if parsed.value("cache-base") == nil && !parsed.flag("json") {
            FileHandle.standardError.write(Data("speech demo: removed \(temp.path) (the demo's Hub and cache); --cache-base DIR keeps the model in DIR\n".utf8))
        }
        exit(code)
    }

    /// Removes the demo's Hub root and log, and the scratch folder holding them unless the cache
    /// is in it too.
    private static func removeScratch(root: URL, log: URL) {
        try? FileManager.default.removeItem(at: root)
        try? FileManager.default.removeItem(at: log)
        rmdir(root.deletingLastPathComponent().path)
    }

    /// "3M" → 3 MiB; K, M, G are binary; a plain number is bytes.
    static func parseSize(_ text: String) -> Int? {
        var number = text.uppercased()
        var multiplier = 1.0
        if number.hasSuffix("IB") { number.removeLast(2) } else if number.hasSuffix("B") && number.count > 1 { number.removeLast() }
        if let last = number.last, let m = ["K": 1024.0, "M": 1048576.0, "G": 1073741824.0][String(last)] {
            multiplier = m
            number.removeLast()
        }
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        return Int((value * multiplier).rounded())
    }
}

/// The demo's scratch folder, removed at exit (`atexit` takes no closure with captures).
nonisolated(unsafe) private var demoScratch: String?

/// Removes the demo's scratch folder and everything in it.
private func removeDemoScratch(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}
