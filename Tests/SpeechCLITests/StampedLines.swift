// StampedLines - a child's output lines, each with the instant it arrived: what the tests of
// progress, retries and rate caps judge timing by.
import Foundation
@testable import TestSupport
import XCTest

/// Lines with the instant each was seen, filled from another thread.
final class StampedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [(time: Date, text: String)] = []
    func add(_ text: String) { lock.withLock { lines.append((Date(), text)) } }

    init() {}

    /// Lines read from `pipe` on a thread of their own until it closes, each stamped as it arrives.
    convenience init(following pipe: Pipe) {
        self.init()
        let reader = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    add(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
            }
        }
    }
    var all: [(time: Date, text: String)] { lock.withLock { lines } }
}


/// Which output of a child its lines are read from.
enum StampedStream {
    case standardOutput, standardError
}

extension DaemonTestCase {
    /// `speech <arguments>` with `stream` on a pipe, each line stamped as it arrives, and its other
    /// output and its input on /dev/null; killed in tearDown.
    func speechStamped(_ arguments: [String], extra: [String: String] = [:],
                       following stream: StampedStream = .standardOutput) throws -> (Process, StampedLines) {
        let p = Process()
        p.executableURL = speechBinary
        p.arguments = arguments
        p.environment = environment(extra: extra)
        p.standardInput = FileHandle.nullDevice
        let pipe = Pipe()
        p.standardOutput = stream == .standardOutput ? pipe : FileHandle.nullDevice
        p.standardError = stream == .standardError ? pipe : FileHandle.nullDevice
        try p.run()
        track(p)
        return (p, StampedLines(following: pipe))
    }
}
