// ReadyView - the last listing of `jobs/ready`, shared in RAM by the worker processes of this
// machine, so that a wake-up costs the file server one listing per node, not one per process,
// and a slot that finishes a range does not list a folder known to be empty.
//
// Two files beside LiveProgress's records on /dev/shm: `.ready-epoch`, a 64-bit counter that
// every process bumps when it learns that `jobs/ready` may have gained a job (inotify saw one
// arrive from this machine, or the wake word said another node's generation moved), and
// `.ready`, the names one process listed, tagged with the epoch it read *before* listing. A
// listing is used only while the epoch still has that value and it is younger than `maxAge`, so
// a job published after someone started listing is never hidden by that listing: the bump that
// announced it makes the listing's tag stale. A job that another node took since the listing
// costs one failed try (a claim is a rename; the loser's is ENOENT), and a scan whose tries all
// fail lists afresh. Nothing here is on the shared filesystem.
//
// The record keeps the first `kept` jobs a scan tries (every file's first range, then the later
// ranges, each sorted) and the count of all it listed: a claim reads and rewrites the record, and
// a repo of ten thousand small files planned at once would otherwise make every claim parse and
// write ten thousand names (quadratic in the files; scenario 8 of docs/benchmarks.md). When the
// kept jobs are all taken while others were listed, the record is stale and one process lists again.
//
// The record also carries the claims a node's fair share is judged by, once one slot listed
// `jobs/claimed` at the record's epoch (`noteClaims`): every claim, and this node's. A claim this
// machine makes (`taken`) or ends (`claimEnded`) is counted in or out, so the slots woken by one
// change list the claims once between them, not once per claim.
import Foundation
import ModelCache
import SharedFiles

/// What a shared listing of `jobs/ready` offers: the first jobs a scan tries, and how many it found.
public struct ReadyListing: Sendable, Equatable {
    /// At most `ReadyView.kept` names: every file's first range, then later ranges, each sorted.
    public var names: [String]
    /// Every job listed, less those taken since (the node's fair share counts them all).
    public var count: Int
    /// The claims counted at this epoch (one listing of `jobs/claimed` for the machine), with
    /// this machine's claims made and ended since; nil until a slot listed them.
    public var claims: ClaimCount?

    /// The listing of `all` (sorted), keeping the jobs a scan tries first.
    public init(_ all: [String]) {
        count = all.count
        guard all.count > ReadyView.kept else {
            names = all
            return
        }
        let firstSuffix = PlannedFile.jobName(key: "", index: 0)
        var firsts: [String] = []
        var later: [String] = []
        for name in all where firsts.count < ReadyView.kept {
            if name.hasSuffix(firstSuffix) { firsts.append(name) } else if later.count < ReadyView.kept { later.append(name) }
        }
        names = Array((firsts + later).prefix(ReadyView.kept))
    }

    init(names: [String], count: Int, claims: ClaimCount? = nil) {
        self.names = names
        self.count = count
        self.claims = claims
    }
}

/// The claims a node's fair share is judged by (`ClaimPolicy.withinCountShare`): all of them,
/// and this node's.
public struct ClaimCount: Sendable, Equatable {
    public var total: Int
    public var mine: Int

    public init(total: Int, mine: Int) {
        self.total = total
        self.mine = mine
    }
}

public struct ReadyView: Sendable {
    let recordPath: String
    let epochPath: String
    /// Held (flock, this machine only) by the one process listing `jobs/ready` for the others.
    let listerPath: String
    /// Held (flock, this machine only) by the one slot of the machine claiming now.
    let claimerPath: String
    let directory: String
    let live: LiveProgress
    /// A listing older than this is listed again even when no wake-up said it changed: the
    /// safety net under a wake-up that was lost.
    static let maxAge: UInt64 = 5_000_000_000
    /// Jobs a record keeps: far more than a node's slots try from one listing (4 tries each, 16
    /// slots), few enough that a claim's rewrite of the record costs next to nothing.
    public static let kept = 256

    /// The view of `spool`'s ready jobs on this machine, or nil without a writable /dev/shm.
    public init?(spool: Spool) {
        guard let live = LiveProgress(spool: spool) else { return nil }
        self.live = live
        directory = live.directory
        recordPath = MachineFiles.path("ready", beside: live)
        epochPath = MachineFiles.path("ready-epoch", beside: live)
        listerPath = MachineFiles.path("ready-lister", beside: live)
        claimerPath = MachineFiles.path("ready-claimer", beside: live)
    }

    /// Runs `body` (a slot's look for a job to claim) while no other slot of this machine runs
    /// its own: each then tries jobs the one before did not take (`taken` drops them from the
    /// listing), where slots of several processes scanning one listing at once raced each other
    /// for the same jobs (a lost race is a touch and a rename of a name that is gone, at the
    /// file server). Without the lock, `body` runs unlocked: it only saves races.
    public func oneClaimAtATime<T>(_ body: () -> T) -> T {
        guard live.prepare() else { return body() }
        return MachineFiles.oneAtATime(claimerPath, body)
    }

    /// The epoch now (nil when the counter cannot be opened: then nothing is shared). A counter
    /// made afresh starts at a random value, so a listing tagged before the files were removed
    /// (a daemon's drain) cannot match a new counter that counted up to its tag.
    public func epoch() -> UInt64? {
        withCounter(exclusive: false) { $0 }
    }

    /// Something may have arrived in `jobs/ready`: listings taken so far are stale.
    public func invalidate() {
        _ = withCounter(exclusive: true) { $0 &+ 1 }
    }

    /// The wake word moved to `word` (another node's change, or a marker): listings taken so far
    /// are stale — once per value of the word for the whole machine, not once per process that
    /// it woke (every worker process of the node wakes on the same bump; each bumping the epoch
    /// made each one's listing stale for the next, so every process listed).
    public func invalidate(forWord word: UInt32) {
        _ = withCounter(exclusive: true, wordSeen: word) { $0 &+ 1 }
    }

    /// The names in `jobs/ready` at `epoch`: the shared listing when it is current, else `list()`
    /// run by one process of the machine at a time (the others, woken by the same change, wait
    /// for its listing and use it), then shared.
    /// A listing that failed (`list()` gives nil: a stale handle, EIO) is not shared: the others
    /// would take it for an empty folder until the next wake-up.
    public func listing(at epoch: UInt64, list: () -> [String]?) -> ReadyListing? {
        if let listing = names(at: epoch) { return listing }
        guard live.prepare() else { return list().map { ReadyListing($0.sorted()) } }
        return MachineFiles.oneAtATime(listerPath) {
            // A process that held the lock before us listed at this epoch (it read the epoch
            // before its listing, as we did): its listing is as fresh as ours would be.
            if let listing = names(at: epoch) { return listing }
            guard let names = list()?.sorted() else { return nil }
            store(names, at: epoch)
            return ReadyListing(names)
        }
    }

    /// The listing made at `epoch`, when it is still the current one (and still offers a job
    /// while it counted some: its kept jobs all taken, the others are listed again).
    public func names(at epoch: UInt64) -> ReadyListing? {
        guard let record = record(), record.tag == epoch, MonotonicClock.nanoseconds() &- record.listedAt < ReadyView.maxAge,
              !record.listing.names.isEmpty || record.listing.count == 0
        else { return nil }
        return record.listing
    }

    /// The shared record as written: its tag, when it was listed, and the names; nil when there
    /// is none or it is not one of ours (only this account can write the folder, LiveProgress
    /// checks it, but a name that is not a job's still means the record was not written here).
    /// The header is `<tag> <listedAt> <count>`, then `<claims> <this node's claims>` once a
    /// slot counted them (a record without the count, of an older build, counts its names).
    private func record() -> (tag: UInt64, listedAt: UInt64, listing: ReadyListing)? {
        guard let data = FileManager.default.contents(atPath: recordPath),
              let text = String(data: data, encoding: .utf8) else { return nil }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let header = lines.first else { return nil }
        let fields = header.split(separator: " ")
        guard (2...5).contains(fields.count), fields.count != 4, let tag = UInt64(fields[0]), let at = UInt64(fields[1]) else { return nil }
        lines.removeFirst()
        let names = lines.filter { !$0.isEmpty }.map(String.init)
        guard names.allSatisfy(ReadyView.looksLikeJob) else { return nil }
        let count = fields.count >= 3 ? Int(fields[2]) : names.count
        guard let count, count >= names.count else { return nil }
        var claims: ClaimCount?
        if fields.count == 5 {
            guard let total = Int(fields[3]), let mine = Int(fields[4]), total >= mine, mine >= 0 else { return nil }
            claims = ClaimCount(total: total, mine: mine)
        }
        return (tag, at, ReadyListing(names: names, count: count, claims: claims))
    }

    /// Whether a record's line can be a job's name (`<24 hex>.<digits>`), judged on its bytes: a
    /// claim reads the record twice, and a full parse of each name was most of a worker's CPU. A
    /// name that passes here and is still not a job is refused where it is claimed (`parseJob`).
    static func looksLikeJob(_ name: String) -> Bool {
        var bytes = 0
        var dot = -1
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): break
            case UInt8(ascii: "a")...UInt8(ascii: "f") where dot < 0: break
            case UInt8(ascii: ".") where dot < 0: dot = bytes
            default: return false
            }
            bytes += 1
        }
        return dot == 24 && bytes >= 31 && bytes <= 34  // 6 to 9 digits, as `parseJob` takes them
    }

    /// Shares `names` (sorted), listed after reading `epoch`.
    public func store(_ names: [String], at epoch: UInt64) {
        write(ReadyListing(names), at: epoch, listedAt: MonotonicClock.nanoseconds())
    }

    /// This process claimed `name`: the shared listing no longer offers it to the others, and
    /// the claims counted at this epoch count it (this node's share).
    public func taken(_ name: String, at epoch: UInt64) {
        _ = withCounter(exclusive: true) { current -> UInt64 in
            guard current == epoch, let record = self.record(), record.tag == epoch,
                  let at = record.listing.names.firstIndex(of: name) else { return current }
            var listing = record.listing
            listing.names.remove(at: at)
            listing.count -= 1
            listing.claims?.total += 1
            listing.claims?.mine += 1
            self.write(listing, at: epoch, listedAt: record.listedAt)
            return current
        }
    }

    /// The claims counted at `epoch` (`noteClaims`, then this machine's claims made and ended
    /// since), while the listing made at that epoch is current; nil otherwise: list them.
    public func claims(at epoch: UInt64) -> ClaimCount? {
        names(at: epoch)?.claims
    }

    /// One slot listed `jobs/claimed` at `epoch`: the other slots of the machine judge their
    /// node's share by this count until the epoch moves (one listing per wake-up for the
    /// machine, not one per claim), each claim of this machine counted in by `taken`.
    public func noteClaims(_ claims: ClaimCount, at epoch: UInt64) {
        _ = withCounter(exclusive: true) { current -> UInt64 in
            guard current == epoch, let record = self.record(), record.tag == epoch else { return current }
            var listing = record.listing
            listing.claims = claims
            self.write(listing, at: epoch, listedAt: record.listedAt)
            return current
        }
    }

    /// A claim of this machine ended (its part published, or the range given back or failed):
    /// the current count no longer counts it, so the node's share has room again without a
    /// listing (the epoch does not move for it).
    public func claimEnded() {
        _ = withCounter(exclusive: true) { current -> UInt64 in
            guard let record = self.record(), record.tag == current, var claims = record.listing.claims else { return current }
            claims.total = max(0, claims.total - 1)
            claims.mine = max(0, claims.mine - 1)
            var listing = record.listing
            listing.claims = claims
            self.write(listing, at: current, listedAt: record.listedAt)
            return current
        }
    }

    /// Removes both files (a daemon that drains); a process that looks again makes them anew.
    public func remove() {
        unlink(recordPath)
        unlink(epochPath)
        unlink(listerPath)
        unlink(claimerPath)
        // And what a process killed while writing the record left (`.ready.<pid>.<thread>`).
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(".ready.") {
            unlink(directory + "/" + name)
        }
    }

    private func write(_ listing: ReadyListing, at epoch: UInt64, listedAt: UInt64) {
        guard live.prepare() else { return }
        let claims = listing.claims.map { " \($0.total) \($0.mine)" } ?? ""
        MachineFiles.replace(recordPath, with: "\(epoch) \(listedAt) \(listing.count)\(claims)\n" + listing.names.map { $0 + "\n" }.joined())
    }

    /// Runs `body` on the counter under its lock and stores what it returns when `exclusive`.
    /// With `wordSeen`, the file's second 8 bytes hold the last wake word that ran `body`: a word
    /// seen already leaves the counter as it is.
    private func withCounter(exclusive: Bool, wordSeen: UInt32? = nil, _ body: (UInt64) -> UInt64) -> UInt64? {
        guard live.prepare() else { return nil }
        let fd = open(epochPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var value: UInt64 = 0
        // A counter too short to hold a value (just made) is started under the exclusive lock.
        for lockMode in exclusive ? [LOCK_EX] : [LOCK_SH, LOCK_EX] {
            while flock(fd, lockMode) != 0 { guard errno == EINTR else { return nil } }
            if withUnsafeMutableBytes(of: &value, { pread(fd, $0.baseAddress, 8, 0) }) == 8 { break }
            guard lockMode == LOCK_EX else { continue }
            value = UInt64.random(in: 0...UInt64.max)
            guard withUnsafeBytes(of: &value, { pwrite(fd, $0.baseAddress, 8, 0) }) == 8 else { return nil }
        }
        if exclusive, let word = wordSeen {
            // The word as last seen, stored one above its value (0: none seen yet).
            var stored: UInt64 = 0
            _ = withUnsafeMutableBytes(of: &stored) { pread(fd, $0.baseAddress, 8, 8) }
            if stored == UInt64(word) + 1 { return value }
            var mark = UInt64(word) + 1
            guard withUnsafeBytes(of: &mark, { pwrite(fd, $0.baseAddress, 8, 8) }) == 8 else { return nil }
        }
        let next = body(value)
        if exclusive && next != value {
            var stored = next
            guard withUnsafeBytes(of: &stored, { pwrite(fd, $0.baseAddress, 8, 0) }) == 8 else { return nil }
        }
        return exclusive ? next : value
    }
}
