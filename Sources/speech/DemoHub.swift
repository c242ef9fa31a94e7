// DemoHub - `speech demo`'s test Hub: the speech-testhub beside speech as a child process (so
// that `speech` does not link the test Hub), with the demo repo, serving until stopped.
import Foundation

struct DemoHub {
    /// The repo `speech-testhub --demo` writes (TestHub's `SyntheticRepo.demo`).
    static let repo = "demo/Speech-Demo-Model"

    let process: Process
    let baseURL: String

    struct StartFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `<executable> --root <root> --demo <size>` and waits for the first line it prints:
    /// the Hub's base URL, once the repo is written and the Hub serves it. What it says on
    /// stderr goes to `log`, and into the error when it does not start.
    static func start(_ executable: String, root: URL, size: Int, log: URL) throws -> DemoHub {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--root", root.path, "--demo", "\(size)"]
        let out = Pipe()
        try FileManager.default.createDirectory(at: log.deletingLastPathComponent(), withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: log.path, contents: nil),
              let err = FileHandle(forWritingAtPath: log.path) else {
            throw StartFailure(description: "cannot create \(log.path) for the test Hub's messages")
        }
        defer { try? err.close() }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        try process.run()
        var said = Data()
        while !said.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            said += chunk
        }
        let line = String(decoding: said, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        guard line.hasPrefix("http://") else {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            let stderr = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            throw StartFailure(description: "\(executable) did not start the test Hub (exit status \(process.terminationStatus))"
                               + (stderr.isEmpty ? "" : ": \(stderr)"))
        }
        return DemoHub(process: process, baseURL: line)
    }

    /// Stops the Hub (SIGTERM: it exits 0) and waits for it.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
