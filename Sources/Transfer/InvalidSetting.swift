// InvalidSetting - an environment variable that is set to something it cannot mean.
import ByteUnits
import Foundation

/// A variable of the environment set to a value that cannot be read. A call fails naming it, as
/// it fails on an invalid flag, rather than run without the setting (a cap silently not applied).
public struct InvalidSetting: Error, Sendable, Equatable, CustomStringConvertible {
    public let variable: String
    public let value: String
    /// The forms the variable takes, in the words of its flag's error.
    public let accepted: String

    public var description: String {
        "\(variable)='\(value)' cannot be read: \(variable) takes \(accepted); fix it or unset it"
    }

    /// The first variable of `env` that is set but cannot be read; nil when every one can.
    /// (`SPEECH_FETCH_MAX_RATE` only: the other knobs fall back to their defaults, docs/cache-and-offline.md.)
    public static func first(in env: [String: String]) -> InvalidSetting? {
        if let raw = env["SPEECH_FETCH_MAX_RATE"], !(ByteRate.parse(raw).map { $0 >= RateCap.minimum } ?? false) {
            return InvalidSetting(variable: "SPEECH_FETCH_MAX_RATE", value: raw, accepted: "bytes per second of at least 1K: a number with K, M or G (1024-based, as curl's --limit-rate), like 500K or 20M, or plain bytes like 65536")
        }
        return nil
    }
}
