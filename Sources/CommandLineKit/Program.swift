// Program - runs a command line against its spec: help to stdout (exit 0), the version
// (exit 0), a usage error as one line on stderr (exit 64); the exit codes every program shares.
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
    /// libcurl's version line for `--version` (`libcurl/8.14.1 OpenSSL/3.5.1 …`, or why it cannot
    /// be loaded), asked only when the version is printed. The executables hand it in: they link
    /// Curl, this module does not.
    public let libcurl: @Sendable () -> String

    public init(_ name: String, libcurl: @escaping @Sendable () -> String) {
        self.name = name
        self.libcurl = libcurl
    }

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
        "\(name) \(BuildInfo.version)\ncommit \(BuildInfo.commit ?? "unknown (built outside a git checkout)")\nlibcurl \(libcurl())\n"
    }
}

/// Writes all of `text` to a file descriptor, unbuffered (lines interleave with the other stream).
public func write(_ text: String, to fd: Int32) {
    _ = Array(text.utf8).withUnsafeBytes { FileIO.writeAll(fd, $0) }
}

/// What `--version` reports besides libcurl (`Program.libcurl`).
public enum BuildInfo {
    /// The release; bumped by hand with docs/cli.md.
    public static let version = "0.9.0"

    /// The commit the executable was built from, recorded at build time (the BuildCommit
    /// plugin runs scripts/build-commit before every build), so a copied or packaged binary
    /// reports it too; "+dirty" when tracked files differed from it. nil when the build had no
    /// git checkout to ask (a source tarball without SPEECH_FETCH_BUILD_COMMIT).
    public static var commit: String? { BuildCommit.id.isEmpty ? nil : BuildCommit.id }
}
