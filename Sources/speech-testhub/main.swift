// speech-testhub - runs the local Hugging Face Hub stand-in until killed.
//
// Prints the Hub's base URL as the first line of stdout (then nothing else on stdout),
// the CDN URL and repos on stderr. SIGTERM and SIGINT stop it with exit status 0.
import CommandLineKit
import Curl
import Foundation
import TestHub

let spec = CommandSpec(
    name: "speech-testhub",
    summary: """
    Runs the local Hugging Face Hub stand-in until SIGTERM or SIGINT (exit 0). Prints the Hub's
    base URL as the first line of stdout (then nothing else on stdout), the CDN URL on stderr.
    See docs/testhub.md.
    """,
    options: [
        .value("root", "DIR", "folder whose <org>/<name>/ subfolders are served as repos (created if missing; required)"),
        .value("port", "N", "Hub port on 127.0.0.1 (0, the default, picks a free one)"),
        .value("cdn-port", "N", "CDN port (0, the default, picks a free one)"),
        .value("cdn-host", "ADDR", "CDN address, a loopback 127.x.y.z (default 127.0.0.2: another host than the Hub's, as on the Hub)"),
        .value("page-size", "N", "tree listing entries per page (default 1000)"),
        .value("faults", "FILE", "JSON scenario: faults, gated and private repos (docs/testhub.md)"),
        .flag("lfs-oid-prefix", "write tree lfs.oid as \"sha256:<hex>\""),
        .flag("xet", "serve every LFS file of every repo through Xet (docs/testhub.md, \"Xet\")"),
        .value("xet-repo", "REPO", "serve this repo's LFS files through Xet (repeatable)"),
        .value("xet-token-lifetime", "SECONDS", "how long a Xet access token is valid (default 3600)"),
        .value("xet-hash", "FILE", "print FILE's Xet hash and size (\"<hash> <size> <file>\"), no serving (repeatable; --root not needed)"),
        .flag("log", "print each request on stderr (\"hub GET /api/...\", \"cdn GET /cdn/...\", [authorization])"),
        .value("generate", "SPEC", "write synthetic files first: org/name:path=SIZE[,path=SIZE...], SIZE with K, M or G (binary)"),
        .value("demo", "SIZE", "write the repo speech demo downloads first (demo/Speech-Demo-Model: SIZE of shards, e.g. 256M)"),
    ],
    epilogue: "exit codes: 0 stopped by SIGTERM/SIGINT, 1 cannot serve, 64 bad usage.")
let program = Program("speech-testhub", libcurl: CurlLibrary.versionOrReason)

func fail(_ message: String) -> Never { program.fail(message) }
func usageFail(_ message: String) -> Never { program.usageError("speech-testhub: \(message)") }

/// "3M" → 3 MiB; K, M, G are binary; a plain number is bytes.
func parseSize(_ text: String) -> Int? {
    let multipliers: [Character: Double] = ["K": 1024, "M": 1024 * 1024, "G": 1024 * 1024 * 1024]
    var number = text.uppercased()
    var multiplier = 1.0
    if number.hasSuffix("IB") { number.removeLast(2) } else if number.hasSuffix("B") && number.count > 1 { number.removeLast() }
    if let last = number.last, let m = multipliers[last] {
        multiplier = m
        number.removeLast()
    }
    guard let value = Double(number), value >= 0 else { return nil }
    return Int((value * multiplier).rounded())
}

/// "org/name:a.bin=3M,b/c.txt=10" → ("org/name", ["a.bin": 3 MiB, "b/c.txt": 10]).
func parseGenerate(_ spec: String) -> (repo: String, files: [String: Int]) {
    guard let colon = spec.firstIndex(of: ":") else { usageFail("--generate \(spec): expected org/name:path=SIZE[,path=SIZE...]") }
    let repo = String(spec[..<colon])
    var files: [String: Int] = [:]
    for item in spec[spec.index(after: colon)...].split(separator: ",") {
        guard let eq = item.lastIndex(of: "="), let size = parseSize(String(item[item.index(after: eq)...])) else {
            usageFail("--generate \(spec): '\(item)' is not path=SIZE (SIZE like 10, 4K, 3M, 1G)")
        }
        files[String(item[..<eq])] = size
    }
    return (repo, files)
}

func parsePort(_ text: String, flag: String) -> UInt16 {
    guard let port = UInt16(text) else { usageFail("\(flag) takes a number 0-65535, not '\(text)'") }
    return port
}

/// The command line, parsed.
struct Options {
    var root: String?
    var port: UInt16 = 0
    var cdnPort: UInt16 = 0
    var cdnHost = "127.0.0.2"
    var pageSize = 1000
    var faultsPath: String?
    var oidPrefix = false
    var log = false
    var generate: [(repo: String, files: [String: Int])] = []
    var demoSize: Int?
    var xet = false
    var xetRepos: [String] = []
    var xetTokenLifetime: Double?
    var xetHashFiles: [String] = []

    static func parse(_ arguments: [String]) -> Options {
        let parsed = program.parse(spec, arguments)
        var options = Options()
        options.root = parsed.value("root")
        if let v = parsed.value("port") { options.port = parsePort(v, flag: "--port") }
        if let v = parsed.value("cdn-port") { options.cdnPort = parsePort(v, flag: "--cdn-port") }
        if let v = parsed.value("cdn-host") { options.cdnHost = v }
        if let v = parsed.value("page-size") {
            guard let n = Int(v), n > 0 else { usageFail("--page-size takes a positive number, not '\(v)'") }
            options.pageSize = n
        }
        options.faultsPath = parsed.value("faults")
        options.oidPrefix = parsed.flag("lfs-oid-prefix")
        options.log = parsed.flag("log")
        options.xet = parsed.flag("xet")
        options.xetRepos = parsed.values("xet-repo")
        options.xetHashFiles = parsed.values("xet-hash")
        if let v = parsed.value("xet-token-lifetime") {
            guard let seconds = Double(v), seconds >= 0 else { usageFail("--xet-token-lifetime takes seconds, not '\(v)'") }
            options.xetTokenLifetime = seconds
        }
        options.generate = parsed.values("generate").map(parseGenerate)
        if let v = parsed.value("demo") {
            guard let size = parseSize(v), size > 0 else { usageFail("--demo takes a byte count such as 10M or 1G, not '\(v)'") }
            options.demoSize = size
        }
        return options
    }
}

let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
if !options.xetHashFiles.isEmpty {
    for path in options.xetHashFiles {
        do {
            let (hash, size) = try TestHub.xetHash(ofFileAt: path)
            FileHandle.standardOutput.write(Data("\(hash) \(size) \(path)\n".utf8))
        } catch {
            fail("cannot read \(path): \(error)")
        }
    }
    exit(0)
}
guard let root = options.root else { usageFail("--root DIR is required") }
let (port, cdnPort, pageSize, faultsPath, oidPrefix, generate) =
    (options.port, options.cdnPort, options.pageSize, options.faultsPath, options.oidPrefix, options.generate)
let rootURL = URL(fileURLWithPath: root)

var scenario = HubScenario()
if let faultsPath {
    do {
        scenario = try HubScenario.decode(try Data(contentsOf: URL(fileURLWithPath: faultsPath)))
    } catch {
        fail("cannot read the faults file \(faultsPath): \(error)")
    }
}

do {
    for item in generate {
        try TestHub.generateRepo(root: rootURL, repo: item.repo, files: item.files)
    }
    if let size = options.demoSize {
        let demo = SyntheticRepo.demo(size: size)
        try TestHub.generateRepo(root: rootURL, repo: demo.repo, files: demo.sizes)
        try TestHub.writeRepo(root: rootURL, repo: demo.repo, files: demo.contents)
    }
} catch {
    fail("\(error)")
}

let hub: TestHub
do {
    hub = try TestHub(root: rootURL, port: port, cdnPort: cdnPort, cdnHost: options.cdnHost, treePageSize: pageSize)
} catch TestHubError.notLoopback(let host) {
    usageFail("--cdn-host \(host): not an IPv4 loopback address; give 127.x.y.z (e.g. 127.0.0.2)")
} catch {
    fail("\(error)")
}
hub.lfsOidPrefix = oidPrefix
hub.xetEverywhere = options.xet
for repo in options.xetRepos { hub.setXet(repo) }
if let lifetime = options.xetTokenLifetime { hub.xetTokenLifetime = lifetime }
scenario.apply(to: hub)
if options.log {
    hub.observeRequests { line, hadAuthorization in
        FileHandle.standardError.write(Data("speech-testhub: \(line)\(hadAuthorization ? " [authorization]" : "")\n".utf8))
    }
}

FileHandle.standardOutput.write(Data((hub.baseURL + "\n").utf8))
FileHandle.standardError.write(Data("speech-testhub: hub \(hub.baseURL), cdn \(hub.cdnURL), root \(rootURL.path)\n".utf8))

signal(SIGTERM, SIG_IGN)
signal(SIGINT, SIG_IGN)
let stopSources = [SIGTERM, SIGINT].map { number in
    let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
    source.setEventHandler {
        hub.stop()
        exit(0)
    }
    source.resume()
    return source
}
withExtendedLifetime(stopSources) {
    dispatchMain()
}
