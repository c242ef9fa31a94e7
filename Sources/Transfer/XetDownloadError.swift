// XetDownloadError - how fetching a Xet-backed file fails, each naming the file.
import Foundation

public enum XetDownloadError: Error, Sendable, CustomStringConvertible {
    /// The bytes received twice (the second time fetched afresh from the CAS) did not make the
    /// file the Hub names: nothing was put in place.
    case verificationFailed(path: String, what: String)
    /// The CAS's reconstruction does not describe the file.
    case badReconstruction(path: String, reason: String)

    public var description: String {
        switch self {
        case .verificationFailed(let path, let what):
            return "\(path): \(what), also when fetched again from the Xet CAS; the Hub's stored copy looks damaged. "
                + "Nothing was put in place. Try again later, or set HF_HUB_DISABLE_XET=1 to fetch it through the Hub's plain path"
        case .badReconstruction(let path, let reason):
            return "\(path): the Xet CAS's reconstruction is unusable (\(reason)); set HF_HUB_DISABLE_XET=1 to fetch it through the Hub's plain path"
        }
    }
}

/// Why one fetch of a Xet-backed file cannot be used: the file is fetched once more from scratch.
struct XetBadBytes: Error {
    let what: String
}
