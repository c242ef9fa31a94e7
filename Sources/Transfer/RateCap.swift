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
//
// `speech-fetchd --max-rate` shares one schedule between every worker process of the node: its
// 8 bytes live in a file on /dev/shm (RAM, this machine only) that each worker opens, and a
// charge reads and advances them under flock, at least 5 ms of the cap at once (`grant`). The
// lock is only ever local (the file is on tmpfs, never on the shared cache), and CLOCK_MONOTONIC
// is one clock for every process of a machine, so the processes agree on "paid until".
import Foundation
import SharedFiles
import Synchronization

/// Meters bytes at a fixed rate across every thread and connection that share it.
public final class RateCap: Sendable {
    /// The cap, in bytes per second.
    public let bytesPerSecond: Int64
    /// When the bytes charged so far are paid for, in CLOCK_MONOTONIC nanoseconds; with a
    /// `shared` file, its copy there is the one that counts (this one only orders the threads).
    /// `prepaid`: with a shared file, the nanoseconds of the cap this process charged to the
    /// node's schedule ahead of its bytes (`grant`), which its next chunks use up first.
    private let paidUntil = Mutex<(paid: UInt64, prepaid: UInt64)>((0, 0))
    /// The node's schedule, shared with the other processes (`speech-fetchd --max-rate`).
    private let shared: Int32?

    /// Credit the schedule keeps for time in which nobody read: 0.2 s of the cap.
    static let slack: UInt64 = 200_000_000

    /// The least a process charges the node's schedule at once: 5 ms of the cap. A chunk within
    /// what the process charged before takes no lock and no system call, so a cap far above the
    /// link costs the workers next to nothing (a lock per chunk cost them about a tenth more CPU
    /// at 100G: docs/benchmarks.md, scenario 7), and a process is at most 5 ms of the cap ahead
    /// of its bytes.
    static let grant: UInt64 = 5_000_000

    /// The smallest cap: below it one chunk would take seconds and ranges would look stalled.
    public static let minimum: Int64 = 1 << 10

    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = max(RateCap.minimum, bytesPerSecond)
        shared = nil
    }

    /// A cap shared with every process that opens the same `schedule` file (created when
    /// missing, mode 0600); a file that cannot be opened is an error naming it.
    public init(bytesPerSecond: Int64, schedule path: String) throws {
        self.bytesPerSecond = max(RateCap.minimum, bytesPerSecond)
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw RateCapUnavailable(path: path, errno: errno) }
        shared = fd
    }

    deinit { if let shared { close(shared) } }

    /// Creates the node's schedule file for `speech-fetchd --max-rate` and returns its path:
    /// on /dev/shm when there is one (the workers' charges stay in RAM), else in `fallback`.
    /// `name` ends in the daemon's pid (`speech-fetchd-rate-<uid>-<pid>`): the files of that
    /// form whose pid no longer runs (a daemon killed with SIGKILL never removes its own) go.
    public static func makeSchedule(name: String, fallback: String) throws -> String {
        var isDirectory: ObjCBool = false
        let dir = FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
            && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : fallback
        let path = dir + "/" + name
        unlink(path)  // a schedule a crashed daemon left: its time is past, but start clean
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw RateCapUnavailable(path: path, errno: errno) }
        close(fd)
        if let dash = name.lastIndex(of: "-"), Int32(name[name.index(after: dash)...]) != nil {
            removeSchedulesOfDaemonsThatAreGone(in: dir, prefix: String(name[...dash]))
        }
        return path
    }

    /// Unlinks `<prefix><pid>` files in `dir` whose pid is not running.
    static func removeSchedulesOfDaemonsThatAreGone(in dir: String, prefix: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] where name.hasPrefix(prefix) {
            guard let pid = Int32(name.dropFirst(prefix.count)), pid > 0 else { continue }
            if !LeaseJudge.processRunning(pid) { unlink(dir + "/" + name) }
        }
    }

    /// The receive buffer each connection should use under this cap: 1/1600 s of the whole
    /// cap, from 1 KiB (libcurl's least) to 256 KiB (the engine's usual size). libcurl reads a
    /// socket that has data waiting up to 100 times before it turns to the next connection, and
    /// under a cap data is always waiting while each read waits its turn: so 100 reads are 1/16 s
    /// of the cap. With reads of 1/16 s (before), one connection held a poll for up to 6 s and
    /// the loop saw a small file's end, or started the next job, only once every range in flight
    /// was whole (a 39-byte config.json was final last under --max-rate).
    public var readSize: Int {
        Int(min(256 << 10, max(1 << 10, bytesPerSecond / 1600)))
    }

    /// Charges `bytes` that just arrived and blocks the calling thread until the cap allows them.
    public func take(_ bytes: Int) {
        guard bytes > 0 else { return }
        let cost = UInt64((Double(bytes) / Double(bytesPerSecond) * 1e9).rounded())
        let until = paidUntil.withLock { state -> UInt64 in
            let now = RateCap.now()
            guard let fd = shared else {
                state.paid = RateCap.advance(state.paid, now: now, cost: cost)
                return state.paid
            }
            // Charged already (the last grant): wait until that grant is paid for.
            if state.prepaid >= cost {
                state.prepaid -= cost
                return state.paid
            }
            // Across processes: read, advance and write the node's schedule under its lock.
            let charge = max(cost, RateCap.grant)
            _ = FileIO.restartingAfterSignal { flock(fd, LOCK_EX) }
            defer { flock(fd, LOCK_UN) }
            var stored: UInt64 = 0
            let n = withUnsafeMutableBytes(of: &stored) { pread(fd, $0.baseAddress, 8, 0) }
            var next = RateCap.advance(n == 8 ? stored : 0, now: now, cost: charge)
            _ = withUnsafeBytes(of: &next) { pwrite(fd, $0.baseAddress, 8, 0) }
            state = (next, charge - cost)
            return next
        }
        RateCap.sleep(until: until)
    }

    /// The schedule after charging `cost` at `now`: the first charge starts it with no credit
    /// (no burst at the start); later it keeps at most `slack` of credit.
    static func advance(_ paid: UInt64, now: UInt64, cost: UInt64) -> UInt64 {
        (paid == 0 ? now : max(paid, now > slack ? now - slack : 0)) + cost
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// A wait shorter than this is left to a later chunk: the schedule keeps the debt, so the
    /// rate is the same, but small reads (`readSize`) do not each cost a sleep and a wake-up.
    static let shortestNap: UInt64 = 4_000_000

    /// Sleeps until the monotonic clock reaches `deadline` when it is `shortestNap` away or
    /// more; a signal (Ctrl-C) ends it early.
    static func sleep(until deadline: UInt64) {
        let now = RateCap.now()
        guard deadline > now + shortestNap else { return }
        let wait = deadline - now
        var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
        _ = nanosleep(&ts, nil)
    }
}

/// The node's shared schedule file could not be opened.
public struct RateCapUnavailable: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let errno: Int32
    public var description: String {
        "cannot open the node's rate schedule \(path) (\(String(cString: strerror(errno)))); "
            + "check that /dev/shm is writable by this account, or run speech-fetchd without --max-rate"
    }
}
