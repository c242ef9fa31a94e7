// BackgroundTransfer - the seed's opt-in to transfers that outlive the process. On Linux the
// system service that keeps transferring while the caller is gone is the node's speech-fetchd:
// setting `HuggingFaceDownloader.backgroundTransfer` hands every `downloadWeights` call to it
// (starting one when none serves the cache base); cancelling the waiting task only detaches it.
import Foundation
import Daemon
import Spool
import Synchronization

/// Opts in to transfers that survive the calling process (speech-swift's names; docs/api.md).
public struct BackgroundTransferConfiguration: Sendable, Equatable {
    /// Names the session. On Linux the session is the speech-fetchd serving the cache base; the
    /// identifier is what `handleBackgroundSessionEvents` is asked about.
    public var sessionIdentifier: String
    /// Apple app-group container; no meaning on Linux (kept so the same code compiles).
    public var sharedContainerIdentifier: String?
    /// True: a speech-fetchd this process starts runs at nice 10 (the system picks the moment).
    /// Default false: it starts at once at normal priority.
    public var isDiscretionary: Bool
    /// No meaning on Linux (kept so the same code compiles).
    public var allowsCellularAccess: Bool
    /// Bounds how long a caller waits for a request handed to speech-fetchd (then
    /// `HandoffError.timedOut`; the daemon goes on). Replaces the stall guard, which does not
    /// apply to a transfer another process performs. Default 24 hours.
    public var resourceTimeout: TimeInterval

    public init(sessionIdentifier: String, sharedContainerIdentifier: String? = nil, isDiscretionary: Bool = false,
                allowsCellularAccess: Bool = true, resourceTimeout: TimeInterval = 24 * 60 * 60) {
        self.sessionIdentifier = sessionIdentifier
        self.sharedContainerIdentifier = sharedContainerIdentifier
        self.isDiscretionary = isDiscretionary
        self.allowsCellularAccess = allowsCellularAccess
        self.resourceTimeout = resourceTimeout
    }
}

extension HuggingFaceDownloader {
    private static let backgroundConfiguration = Mutex<BackgroundTransferConfiguration?>(nil)

    /// nil (the default): `downloadWeights` transfers in this process. Set: it hands every
    /// transfer to the node's speech-fetchd. Set it before the first download.
    public static var backgroundTransfer: BackgroundTransferConfiguration? {
        get { backgroundConfiguration.withLock { $0 } }
        set { backgroundConfiguration.withLock { $0 = newValue } }
    }

    /// Answers `completionHandler` at once: speech-fetchd puts finished files in the cache itself,
    /// so there are no events to deliver to a relaunched process.
    public static func handleBackgroundSessionEvents(identifier: String, completionHandler: @escaping @Sendable () -> Void) {
        completionHandler()
    }

    /// The speech-fetchd to start: `SPEECH_FETCHD`, else the one beside this program, else on `PATH`.
    static func fetchdExecutable(_ environment: [String: String]) throws -> String {
        var candidates: [String] = []
        if let explicit = environment["SPEECH_FETCHD"], !explicit.isEmpty { candidates.append(explicit) }
        if let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((me as NSString).deletingLastPathComponent + "/speech-fetchd")
        }
        for dir in (environment["PATH"] ?? "/usr/local/bin:/usr/bin").split(separator: ":") {
            candidates.append(String(dir) + "/speech-fetchd")
        }
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
        throw DownloadError.noDaemonExecutable(searched: candidates)
    }

    /// Makes sure a speech-fetchd serves `base`, starting one (in its own session, logging to the
    /// spool) when none does.
    func ensureDaemon(base: URL, discretionary: Bool) throws {
        _ = try Spool(base: base, node: settings.node, lease: settings.lease)  // its error names the folder
        guard let handoff = Handoff(base: base, settings: settings, environment: environment), !handoff.daemonServes else { return }
        try handoff.startDaemon(executable: try HuggingFaceDownloader.fetchdExecutable(environment), base: base,
                                discretionary: discretionary)
    }
}
