// FuzzSupport - runs one fuzz target under libFuzzer and checks its invariants.
import CFuzzDriver
import Foundation

nonisolated(unsafe) private var target: ((Data) -> Void)?

/// Hands `body` to libFuzzer (which reads its own flags from the command line) and exits with
/// its status. `body` gets each input; a violated `expect` or a trap is a crash libFuzzer saves.
public func fuzzMain(_ body: @escaping (Data) -> Void) -> Never {
    target = body
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    let status = fuzz_run_driver(&argc, &argv) { data, size in
        target?(size == 0 ? Data() : Data(bytes: data!, count: size))
        return 0
    }
    exit(status)
}

/// An invariant of the parser under test: when it does not hold, says which and aborts (a crash
/// to libFuzzer, which saves the input).
public func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        FileHandle.standardError.write(Data("invariant violated: \(message())\n".utf8))
        abort()
    }
}

/// The input as text (invalid UTF-8 repaired, as headers and names reach the parsers).
public func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }
