// StopSignal - SIGINT/SIGTERM turned into a flag that long-running loops poll.
import Foundation
import Synchronization

/// Set when the process receives SIGINT or SIGTERM (after `install()`); a transfer or wait
/// loop checks it and stops cleanly instead of dying mid-write.
///
/// A plain `sigaction` handler that stores into an atomic: no helper thread (a dispatch signal
/// source starts Dispatch's threads in every process, which a `speech wait` or an offline call
/// pays for at start and exit). The handler is installed with `SA_RESTART`; waits with a
/// timeout (the watcher's poll, the wake word's futex) return early with EINTR and their
/// loops look at the flag at once. A signal that lands in the instant between a loop's look and
/// its sleep is seen when that sleep ends (its pass: 2 s by default). Signals are per process,
/// so every instance reads the same flag.
public final class StopSignal: Sendable {
    public init() {}

    public var isRaised: Bool { stopRaised.load(ordering: .relaxed) }

    public func install() {
        _ = stopRaised.load(ordering: .relaxed)  // the global exists before a handler can touch it
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in stopRaised.store(true, ordering: .relaxed) }
        action.sa_flags = SA_RESTART
        sigemptyset(&action.sa_mask)
        for sig in [SIGINT, SIGTERM] { sigaction(sig, &action, nil) }
    }
}

private let stopRaised = Atomic<Bool>(false)
