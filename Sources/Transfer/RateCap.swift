// RateCap - one bandwidth cap shared by every connection of a transfer (`speech download
// --max-rate`): the sum of their rates, not each one's.
//
// A cap per libcurl handle (CURLOPT_MAX_RECV_SPEED_LARGE) divided by the handles in flight is
// wrong whenever the number in flight changes (one file left, ranges ending at different times),
// so the engine's write path meters instead: every chunk a connection hands over is charged to
// one schedule, and the thread that took it sleeps until the schedule has paid for it. Sleeping
// in the write callback stops reading that socket; TCP's window then slows the sender, so the
// link carries no more than the cap either. The schedule keeps at most `slack` of credit: the
// moments in which no connection reads (a range's request going out, the loop's bookkeeping)
// are made up for, but a long pause is never followed by a burst of more than 0.2 s of the cap.
// Reads are kept small (`readSize`) so that no sleep holds the embedded engine's loop for long.
import Foundation
import Synchronization

/// Meters bytes at a fixed rate across every thread and connection that share it.
public final class RateCap: Sendable {
    /// The cap, in bytes per second.
    public let bytesPerSecond: Int64
    /// When the bytes charged so far are paid for, in CLOCK_MONOTONIC nanoseconds.
    private let paidUntil = Mutex<UInt64>(0)

    /// Credit the schedule keeps for time in which nobody read: 0.2 s of the cap.
    static let slack: UInt64 = 200_000_000

    /// The smallest cap: below it one chunk would take seconds and ranges would look stalled.
    public static let minimum: Int64 = 1 << 10

    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = max(RateCap.minimum, bytesPerSecond)
    }

    /// The receive buffer each connection should use under this cap: about 1/16 s of the
    /// whole cap (so 16 connections each get a chunk about once a second, far inside the stall
    /// guard), from 1 KiB (libcurl's least) to 256 KiB (the engine's usual size).
    public var readSize: Int {
        Int(min(256 << 10, max(1 << 10, bytesPerSecond / 16)))
    }

    /// Charges `bytes` that just arrived and blocks the calling thread until the cap allows them.
    public func take(_ bytes: Int) {
        guard bytes > 0 else { return }
        let cost = UInt64((Double(bytes) / Double(bytesPerSecond) * 1e9).rounded())
        let now = RateCap.now()
        let until = paidUntil.withLock { paid -> UInt64 in
            // The first chunk starts the schedule with no credit: no burst at the start.
            paid = (paid == 0 ? now : max(paid, now > RateCap.slack ? now - RateCap.slack : 0)) + cost
            return paid
        }
        RateCap.sleep(until: until)
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Sleeps until the monotonic clock reaches `deadline`; a signal (Ctrl-C) ends it early.
    static func sleep(until deadline: UInt64) {
        let now = RateCap.now()
        guard deadline > now else { return }
        let wait = deadline - now
        var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
        _ = nanosleep(&ts, nil)
    }
}

/// A rate in bytes per second as the peers write it: `20M`, `500K`, `1.5M`, `2G`, or plain
/// bytes (`65536`); K, M and G are 1024-based (curl's `--limit-rate`, aria2's
/// `--max-download-limit`), upper or lower case.
public enum ByteRate {
    /// The rate `text` names, or nil when it is not one (the caller says what was wrong).
    public static func parse(_ text: String) -> Int64? {
        var digits = text.trimmingCharacters(in: .whitespaces)
        var unit: Double = 1
        switch digits.last.map({ Character($0.lowercased()) }) {
        case "k": unit = 1024
        case "m": unit = 1024 * 1024
        case "g": unit = 1024 * 1024 * 1024
        default: break
        }
        if unit > 1 { digits.removeLast() }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              digits.filter({ $0 == "." }).count <= 1, digits.first != ".", digits.last != ".",
              let value = Double(digits), value.isFinite else { return nil }
        let bytes = value * unit
        guard bytes >= 1, bytes < Double(Int64.max / 2) else { return nil }
        return Int64(bytes.rounded())
    }

    /// `2.0 MiB/s`: a rate for messages.
    public static func describe(_ bytesPerSecond: Int64) -> String {
        let units = ["B/s", "KiB/s", "MiB/s", "GiB/s"]
        var value = Double(bytesPerSecond)
        var i = 0
        while value >= 1024, i < units.count - 1 { value /= 1024; i += 1 }
        return i == 0 ? "\(bytesPerSecond) B/s" : "\(String(format: "%.1f", value)) \(units[i])"
    }
}
