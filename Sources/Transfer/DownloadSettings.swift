// DownloadSettings - the tuning knobs, with the page's defaults and their environment variables.
import ByteUnits
import Foundation
import HubClient
import ModelCache
import SharedFiles

public struct DownloadSettings: Sendable, Equatable {
    /// Files at or above this size transfer as concurrent ranges (`HF_DOWNLOAD_RANGE_THRESHOLD`).
    public var rangeThreshold: Int64 = 8 << 20
    /// Bytes per range, a multiple of 64 KiB (`HF_DOWNLOAD_RANGE_CHUNK`).
    public var rangeSize: Int64 = 8 << 20
    /// Requests in flight across the whole file set, 1...16 (`HF_DOWNLOAD_RANGE_CONCURRENCY`).
    public var concurrency: Int = 16
    /// Seconds without progress before an attempt is abandoned and retried (`HF_DOWNLOAD_STALL_TIMEOUT`).
    public var stallTimeout: Double = 300
    public var connectTimeout: Double = 15
    /// Attempts and backoff (`SPEECH_FETCH_RETRY_ATTEMPTS`, `SPEECH_FETCH_RETRY_DELAYS` as "5,15,30,60").
    public var retry = RetryPolicy()
    /// This machine's name in claims and locks (`SPEECH_FETCH_NODE`, default the host name).
    public var node: String = LockOwner.localNode()
    /// Seconds after which a claim or lock that was not refreshed may be revoked (`SPEECH_FETCH_LEASE_SECONDS`).
    public var lease: Double = 30
    /// Bounded poll where inotify cannot see other machines' writes (`SPEECH_FETCH_POLL_SECONDS`).
    public var pollInterval: Double = 1
    /// Daemon workers may duplicate another node's far-behind range once nothing is ready
    /// (`SPEECH_FETCH_ENDGAME=0` turns it off; docs/cluster.md).
    public var endgame = true
    /// Seconds to wait for a lock another process holds (a huggingface_hub blob lock) before
    /// the call fails saying so (`SPEECH_FETCH_LOCK_WAIT_SECONDS`).
    public var lockWait: Double = 300
    /// A cap on the bytes per second of all the transfer's connections together, nil for none
    /// (`speech download --max-rate`, `SPEECH_FETCH_MAX_RATE` as `20M`, `500K` or bytes: `ByteRate`).
    /// A capped call runs its transfer in its own process: a daemon's workers serve every caller.
    public var maxRate: Int64?
    /// `speech-fetchd --max-rate`, as its workers see it: the node's cap in bytes per second and
    /// the file of the schedule every worker of the node charges (RateCap). The supervisor sets
    /// them in its workers' environment (`SPEECH_FETCH_NODE_MAX_RATE`, `SPEECH_FETCH_NODE_RATE_FILE`).
    public var nodeMaxRate: Int64?
    public var nodeRateSchedule: String?
    /// Xet-backed files (the tree's `xetHash`) are fetched natively, as reconstructions and xorb
    /// ranges; `HF_HUB_DISABLE_XET=1` (huggingface_hub's switch) fetches them plainly, through
    /// the Hub's bridge (docs/xet.md).
    public var xet = true
    /// Bytes of a file one reconstruction request asks for (`SPEECH_FETCH_XET_PAGE`; 256 MiB,
    /// as hf_xet): a large file's reconstruction comes in pages.
    public var xetPageSize: Int64 = 256 << 20

    public static let pageSize: Int64 = 64 << 10

    public init() {}

    /// The defaults overridden by whichever variables are set to valid values.
    public static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> DownloadSettings {
        var s = DownloadSettings()
        if let v = positive(Int64.self, "HF_DOWNLOAD_RANGE_THRESHOLD", in: env) { s.rangeThreshold = v }
        if let v = positive(Int64.self, "HF_DOWNLOAD_RANGE_CHUNK", in: env) { s.rangeSize = v }
        if let v = positive(Int.self, "HF_DOWNLOAD_RANGE_CONCURRENCY", in: env) { s.concurrency = v }
        if let v = positive(Double.self, "HF_DOWNLOAD_STALL_TIMEOUT", in: env) { s.stallTimeout = v }
        if let v = env["SPEECH_FETCH_NODE"], !v.trimmingCharacters(in: .whitespaces).isEmpty {
            s.node = LockOwner.localNode(v)
        }
        if let v = positive(Double.self, "SPEECH_FETCH_LEASE_SECONDS", in: env) { s.lease = v }
        if let v = positive(Double.self, "SPEECH_FETCH_POLL_SECONDS", in: env) { s.pollInterval = v }
        if let v = positive(Double.self, "SPEECH_FETCH_LOCK_WAIT_SECONDS", in: env) { s.lockWait = v }
        if let on = EnvironmentFlag.value("SPEECH_FETCH_ENDGAME", in: env) { s.endgame = on }
        // A value that cannot be read is not ignored: a call fails naming it (InvalidSetting).
        if let raw = env["SPEECH_FETCH_MAX_RATE"], let v = ByteRate.parse(raw), v >= RateCap.minimum {
            s.maxRate = v
        }
        if let raw = env["SPEECH_FETCH_NODE_MAX_RATE"], let v = Int64(raw), v > 0,
           let file = env["SPEECH_FETCH_NODE_RATE_FILE"], file.hasPrefix("/") {
            s.nodeMaxRate = v
            s.nodeRateSchedule = file
        }
        if EnvironmentFlag.isOn("HF_HUB_DISABLE_XET", in: env) { s.xet = false }
        if let v = positive(Int64.self, "SPEECH_FETCH_XET_PAGE", in: env) { s.xetPageSize = v }
        var attempts = s.retry.attempts
        var delays = s.retry.delays
        if let v = positive(Int.self, "SPEECH_FETCH_RETRY_ATTEMPTS", in: env) { attempts = v }
        if let raw = env["SPEECH_FETCH_RETRY_DELAYS"] {
            let parsed = raw.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            if !parsed.isEmpty, parsed.allSatisfy({ $0 >= 0 }) { delays = parsed }
        }
        s.retry = RetryPolicy(attempts: attempts, delays: delays)
        return s.normalized()
    }

    /// A variable's value when it reads as a number above zero (spaces around it allowed), else nil:
    /// the one reading of every numeric setting, so that a bad value leaves the default in place.
    private static func positive<Number: LosslessStringConvertible & Comparable & Numeric>(
        _: Number.Type, _ name: String, in env: [String: String]
    ) -> Number? {
        guard let raw = env[name], let value = Number(raw.trimmingCharacters(in: .whitespaces)), value > 0 else { return nil }
        return value
    }

    /// Range size rounded to 64 KiB (at least one page), concurrency capped to 1...16.
    public func normalized() -> DownloadSettings {
        var s = self
        let pages = max(1, (rangeSize + DownloadSettings.pageSize / 2) / DownloadSettings.pageSize)
        s.rangeSize = pages * DownloadSettings.pageSize
        s.concurrency = min(16, max(1, concurrency))
        s.rangeThreshold = max(1, rangeThreshold)
        return s
    }
}
