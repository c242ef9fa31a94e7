// FailureKind - why a request or a file failed, as a type. Metrics count by it and the command
// line decides by it; the reason beside it is for people and may be reworded freely.
import Digest
import ModelCache
import SharedFiles

/// What kind of failure a `failed/` or `failures/` record holds (its `kind` field).
public enum FailureKind: String, Sendable, CaseIterable {
    /// `speech cancel` withdrew the request.
    case cancelled
    /// The bytes did not verify: SHA-256, git blob id or size.
    case checksumMismatch = "checksum-mismatch"
    /// The disk (or quota) holding the model is full, or smaller than the file.
    case diskFull = "disk-full"
    /// The Hub has no such repo, revision or file (or will not show a private one without a token).
    case notFound = "not-found"
    /// The repo is gated: its terms are not accepted for the token's account.
    case gated
    /// The Hub or its CDN answered with another HTTP error status.
    case httpError = "http-error"
    /// The Hub or its CDN answered something unusable (a listing that does not parse, Range ignored).
    case badAnswer = "bad-answer"
    /// The Hub or its CDN could not be reached, or stopped sending (connect, resolve, timeout, stall).
    case transport
    /// The daemon does not serve the request: its target lies outside what it may write, or it
    /// was resolved against a Hub the daemon does not fetch from.
    case refused
    /// A failure of this machine: an I/O error, a directory or lock that cannot be used, a
    /// library that cannot be loaded.
    case local
    /// Anything else; also a record written before kinds were recorded, or by a newer version
    /// with a kind this one does not know.
    case other

    /// The kind a record's `kind` field names; `.other` when it is missing or unknown (the one
    /// place an old record's kind is decided).
    public init(recorded value: String?) {
        self = value.flatMap(FailureKind.init(rawValue:)) ?? .other
    }

    /// The kind of a failure the cache and file layers threw; `.other` for any other error (the
    /// daemon's `FailureKind(fetching:)` adds the Hub's and the transfer's).
    public init(_ error: any Error) {
        switch error {
        case let error as CacheError: self.init(cache: error)
        case let error as FileError: self = DiskSpace.isFull(error.errno) ? .diskFull : .local
        case is CryptoUnavailable: self = .local
        default: self = .other
        }
    }

    private init(cache error: CacheError) {
        switch error {
        case .checksumMismatch, .blobMismatch, .sizeMismatch: self = .checksumMismatch
        case .diskFull, .tooLargeForDisk: self = .diskFull
        case .io(_, _, let code): self = DiskSpace.isFull(code) ? .diskFull : .local
        case .notInRepo: self = .notFound
        case .unusableDirectory, .lockWaitExpired, .unsafeCacheEntry: self = .local
        case .cacheMiss, .repairing, .badShardIndex: self = .other
        }
    }
}
