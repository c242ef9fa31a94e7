// DownloadResult - what a download call returns (`DownloadResult`), tells its caller besides
// progress (`DownloadNotice`) and would do (`DownloadPlan`, for `--dry-run`). The names the public
// API takes from the layers below are ExportedTypes.swift's.
import ByteUnits
import Daemon
import Foundation
import Transfer

/// What a download call produced.
public struct DownloadResult: Sendable {
    /// The model's directory, ready to load.
    public let directory: URL
    /// Repo paths of the files the call asked for, all present in `directory`.
    public let files: [String]
    /// The commit the files were fetched at (nil when served from cache without the Hub).
    public let commit: String?
    /// Files actually transferred by this call.
    public let fetched: [String]
    /// Set when the Hub was unreachable and the call was satisfied from the cache.
    public let warning: String?
    /// True when the transfer was handed to speech-fetchd (detached, or waited for).
    public var handedOver: Bool = false
    /// The daemon `--detach` started (nil when one already served the base).
    public var startedDaemon: StartedDaemon? = nil
    /// The spool request the call handed over (`--detach`), which `speech status` shows.
    public var requestID: String? = nil
    /// Include patterns that matched no file of the repo, each with a few repo paths it may have
    /// meant (nearest first): the call fetched nothing for them.
    public var unmatchedPatterns: [UnmatchedPattern] = []
}

/// An include pattern that selected nothing, and the repo paths nearest to it.
public struct UnmatchedPattern: Sendable, Equatable {
    public let pattern: String
    public let nearPaths: [String]
}

/// Something a download call tells its caller besides progress.
public enum DownloadNotice: Sendable, Equatable {
    /// The request went to the speech-fetchd serving this spool; this call waits for it.
    case handedToDaemon(spool: String)
    /// The daemon serving the request is gone (stopped, killed); this call finishes the
    /// transfer itself from what the daemon staged.
    case daemonGone(spool: String)
    /// A speech-fetchd serves the spool but would not fetch this call as asked (another Hub:
    /// docs/protocol.md, "Endpoints"): the call fetches in its own process, and this says why.
    case notHandedOver(reason: String)
    /// The call has waited a few seconds for something another process holds (a
    /// huggingface_hub blob lock): what, and how long it waits at most.
    case waiting(String)
}

/// What a download call would do, from `HuggingFaceDownloader.plan`.
public struct DownloadPlan: Sendable {
    public struct Entry: Sendable {
        public let path: String
        public let size: Int64
        /// Already in the cache at this commit's content: not fetched.
        public let cached: Bool
    }
    public let directory: URL
    public let commit: String
    public let files: [Entry]
    /// Bytes the call would transfer.
    public var bytesToFetch: Int64 { files.filter { !$0.cached }.reduce(0) { $0 + $1.size } }
}
