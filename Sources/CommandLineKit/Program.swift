// Program - runs a command line against its spec: help to stdout (exit 0), the version
// (exit 0), a usage error as one line on stderr (exit 64); the exit codes every program shares.
import Curl
import Foundation
import SharedFiles

/// Exit codes of every speech-fetch program (docs/cli.md, "Exit codes").
public enum ExitCode {
    public static let success: Int32 = 0
    /// The operation failed (network, Hub, disk, a corrupt file found).
    public static let failure: Int32 = 1
    /// `speech wait --timeout` ran out; the transfer goes on.
    public static let timeout: Int32 = 2
    /// The command line cannot be run as written (sysexits' EX_USAGE).
    public static let usage: Int32 = 64
    /// Stopped by Ctrl-C or SIGTERM (128 + SIGINT).
    public static let interrupted: Int32 = 130
}

/// One program's identity for messages and `--version`.
public struct Program: Sendable {
    /// `speech`, `speech-fetchd`, `speech-testhub`.
    public let name: String

    public init(_ name: String) { self.name = name }

    /// The parsed arguments, or the process ends: help and version print and exit 0, a usage
    /// error prints one line and exits 64.
    public func parse(_ spec: CommandSpec, _ words: [String]) -> ParsedArguments {
        do {
            switch try spec.parse(words) {
            case .run(let parsed): return parsed
            case .help:
                write(spec.help, to: STDOUT_FILENO)
                exit(ExitCode.success)
            case .version:
                write(versionText, to: STDOUT_FILENO)
                exit(ExitCode.success)
            }
        } catch {
            usageError("\(error)", help: spec.name)
        }
    }

    /// Ends the process with a usage error: one line, and where the help is.
    public func usageError(_ message: String, help command: String? = nil) -> Never {
        write("\(message) (see `\(command ?? name) --help`)\n", to: STDERR_FILENO)
        exit(ExitCode.usage)
    }

    /// Ends the process with a one-line reason on stderr.
    public func fail(_ message: String, code: Int32 = ExitCode.failure) -> Never {
        write("\(name): \(message)\n", to: STDERR_FILENO)
        exit(code)
    }

    /// A warning line on stderr.
    public func warn(_ message: String) {
        write("\(name): warning: \(message)\n", to: STDERR_FILENO)
    }

    /// `speech 0.4.0 (commit 85274b5…)` and the libcurl the process would load.
    public var versionText: String {
        "\(name) \(BuildInfo.version)\ncommit \(BuildInfo.commit ?? "unknown (not run from a git checkout)")\nlibcurl \(BuildInfo.libcurl)\n"
    }
}

/// Writes all of `text` to a file descriptor, unbuffered (lines interleave with the other stream).
public func write(_ text: String, to fd: Int32) {
    _ = Array(text.utf8).withUnsafeBytes { FileIO.writeAll(fd, $0) }
}

/// What `--version` reports.
public enum BuildInfo {
    /// The release; bumped by hand with docs/cli.md.
    public static let version = "0.9.0"

    /// The commit checked out where the executable was built: the executable sits in that
    /// checkout's `.build/<config>/`, so its `.git` is a few directories up. nil for a binary
    /// installed elsewhere.
    public static var commit: String? {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        for _ in 0..<6 {
            let dotGit = dir.appendingPathComponent(".git")
            if let head = gitHead(dotGit) { return head }
            dir.deleteLastPathComponent()
        }
        return nil
    }

    /// HEAD's commit of a `.git` directory, or of a worktree's `.git` file (`gitdir: …`).
    private static func gitHead(_ dotGit: URL) -> String? {
        var gitDir = dotGit
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dotGit.path, isDirectory: &isDirectory) else { return nil }
        if !isDirectory.boolValue {
            guard let text = try? String(contentsOf: dotGit, encoding: .utf8), text.hasPrefix("gitdir: ") else { return nil }
            gitDir = URL(fileURLWithPath: text.dropFirst(8).trimmingCharacters(in: .whitespacesAndNewlines), relativeTo: dotGit.deletingLastPathComponent())
        }
        guard let head = try? String(contentsOf: gitDir.appendingPathComponent("HEAD"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines) else { return nil }
        guard head.hasPrefix("ref: ") else { return head }
        let ref = String(head.dropFirst(5))
        // A worktree keeps its refs in the common directory.
        var common = gitDir
        if let text = try? String(contentsOf: gitDir.appendingPathComponent("commondir"), encoding: .utf8) {
            common = URL(fileURLWithPath: text.trimmingCharacters(in: .whitespacesAndNewlines), relativeTo: gitDir)
        }
        for root in [gitDir, common] {
            if let sha = try? String(contentsOf: root.appendingPathComponent(ref), encoding: .utf8) {
                return sha.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if let packed = try? String(contentsOf: root.appendingPathComponent("packed-refs"), encoding: .utf8),
               let line = packed.split(separator: "\n").first(where: { $0.hasSuffix(" " + ref) }) {
                return String(line.prefix(while: { $0 != " " }))
            }
        }
        return nil
    }

    /// libcurl's version line (`libcurl/8.14.1 OpenSSL/3.5.1 …`), or why it cannot be loaded.
    public static var libcurl: String {
        do { return try CurlLibrary.versionLine() } catch { return "not loadable: \(error)" }
    }
}
