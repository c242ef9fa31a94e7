// CacheCap - `speech-fetchd --max-cache-size`: when the supervisor runs the size cap's prune.
// After each request of this node that finished (the node that asked for it is the one whose
// cache just grew) and on a slow timer (an embedded download, another node's request), on a
// thread of its own so that a pass over a large cache never holds up splicing; one pass at a
// time. The pass itself (CacheAdmin's prune) is handed in by the daemon's host.
import Foundation

public final class CacheCap: @unchecked Sendable {
    /// Seconds between timed passes (`SPEECH_FETCH_PRUNE_SECONDS`, default 600).
    public let interval: Double
    private let pass: @Sendable () -> Void
    private let lock = NSLock()
    private var running = false
    private var again = false
    private var last: Date?

    public static let defaultInterval = 600.0

    /// Makes the size cap of a cache base for `--max-cache-size` (cacheBase, maxSize, grace,
    /// hubCache, environment, log): CacheAdmin's prune, which sits beside this module and is
    /// handed in by the daemon's host (SpeechFetch's `CacheCap.pruning`).
    public typealias Maker = @Sendable (URL, Int64, Double?, URL?, [String: String], @escaping @Sendable (String) -> Void) -> CacheCap

    public init(interval: Double, pass: @escaping @Sendable () -> Void) {
        self.interval = interval
        self.pass = pass
    }

    /// The supervisor's look, once per loop: no I/O unless a pass is due. `finished`: requests of
    /// this node that finished since the last look. The first look (the daemon's start) runs one.
    func look(now: Date, finished: Int) {
        let due = lock.withLock { () -> Bool in
            guard finished > 0 || last.map({ now.timeIntervalSince($0) >= interval }) ?? true else { return false }
            last = now
            if running { again = true; return false }
            running = true
            return true
        }
        if due { start() }
    }

    private func start() {
        let thread = Thread { [self] in
            while true {
                pass()
                let more = lock.withLock { () -> Bool in
                    if again { again = false; return true }
                    running = false
                    return false
                }
                if !more { return }
            }
        }
        thread.name = "cache-cap"
        thread.start()
    }

    /// True while a pass runs (the supervisor waits for it when it drains).
    var isRunning: Bool { lock.withLock { running } }
}
