// HandoffError - how a hand-over to speech-fetchd failed, as the caller that handed it over sees
// it (Handoff.swift).
import Foundation
import Spool

/// How a hand-over to the daemon failed, as its caller sees it.
public enum HandoffError: Error, Sendable, CustomStringConvertible {
    /// The daemon could not fetch the request (404, gated, checksum mismatch after retries…).
    /// `kind` says what failed (decide by it); `reason` says it to a person.
    case requestFailed(repo: String, kind: FailureKind, reason: String)
    case timedOut(repo: String)
    /// A request waits in the spool but no speech-fetchd has served the base for a lease.
    case noDaemon(repo: String, spool: String)
    /// `--detach` started speech-fetchd but it never came up.
    case daemonDidNotStart(log: String)
    /// `--detach` found a speech-fetchd that would not fetch the request as asked (another Hub).
    case notServed(reason: String)

    public var description: String {
        switch self {
        case .requestFailed(let repo, _, let reason):
            return "the download of \(repo) failed: \(reason)"
        case .noDaemon(let repo, let spool):
            return "\(repo) is requested in \(spool) but no speech-fetchd serves it; start `speech-fetchd --cache-base …` or run `speech download \(repo)` to fetch it in this process"
        case .daemonDidNotStart(let log):
            return "speech-fetchd did not start; see \(log)"
        case .notServed(let reason):
            return "cannot --detach: \(reason.replacingOccurrences(of: "; this process fetches", with: ", so it would not fetch")); run it without --detach to fetch it in this process"
        case .timedOut(let repo):
            return "timed out waiting for \(repo); the transfer goes on"
        }
    }
}
