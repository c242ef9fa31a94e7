// FetchFailure - the kind of a failure met while fetching a file for the spool: the Hub's and
// the transfer's errors, then those of the layers below (FailureKind(_:), Spool).
import HubClient
import Spool
import Transfer

extension FailureKind {
    /// The kind recorded for `error`, which a worker or the planner met on a file.
    init(fetching error: any Error) {
        switch error {
        case let error as HubError: self.init(hub: error)
        case is RateCapUnavailable: self = .local
        case let error as XetDownloadError: self.init(xet: error)
        default: self.init(error)
        }
    }

    private init(xet error: XetDownloadError) {
        switch error {
        case .verificationFailed: self = .checksumMismatch
        case .badReconstruction: self = .badAnswer
        }
    }

    private init(hub error: HubError) {
        switch error {
        case .repoNotFound, .revisionNotFound, .entryNotFound: self = .notFound
        case .gatedRepo: self = .gated
        case .http: self = .httpError
        case .transport: self = .transport
        case .badResponse, .badTreeEntry: self = .badAnswer
        case .invalidRevision: self = .other
        }
    }
}
