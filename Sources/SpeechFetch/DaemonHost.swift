// DaemonHost - the download call's side of speech-fetchd: who runs a transfer, and the hand-off a
// call makes (`speech wait` is RequestWait.swift's). The hand-over itself (requests, waiting,
// adoption) is the Daemon module's `Handoff`.
import Daemon
import Foundation

/// Who runs the transfer of a download call.
public enum TransferHost: Sendable {
    /// The daemon when one serves the cache base, else this process.
    case automatic
    /// Always this process (the embedded engine).
    case embedded
    /// Hand the request to the daemon and return at once, starting a daemon when none runs.
    case detach(daemonExecutable: String)
}

extension HuggingFaceDownloader {
    /// The hand-off to the spool of a cache base (nil when no spool can be made there).
    func handoff(base: URL) -> Handoff? {
        Handoff(base: base, settings: settings, environment: environment)
    }
}
