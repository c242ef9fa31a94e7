// StopSignal - SIGINT/SIGTERM turned into a flag that long-running loops poll.
import Foundation

/// Set when the process receives SIGINT or SIGTERM (after `install()`); a transfer or wait
/// loop checks it and stops cleanly instead of dying mid-write.
public final class StopSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var raised = false
    private var sources: [DispatchSourceSignal] = []

    public init() {}

    public var isRaised: Bool { lock.withLock { raised } }

    public func install() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [self] in lock.withLock { raised = true } }
            source.resume()
            sources.append(source)
        }
    }
}
