// Handoff - a caller's side of the spool: hand a request to the daemon and wait for it,
// adopt what a daemon left behind, start a daemon for `--detach`.
import FileEvents
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import Spool
import Synchronization
import Transfer

/// A speech-fetchd that `--detach` started.
public struct StartedDaemon: Sendable, Equatable {
    public let pid: Int32
    /// Where it logs: `<base>/spool/fetchd-<node>.log`.
    public let log: String
}

/// A caller's side of one cache base's spool.
public struct Handoff: Sendable {
    /// Waiters in this process: they share its one inotify watcher, so one may take the event
    /// another's marker made; while more than one waits, each looks at its markers every tick.
    static let waiters = Mutex(0)

    public let spool: Spool
    let settings: DownloadSettings
    let sharing: SpoolSharing
    let environment: [String: String]

    /// The hand-off for the spool of a cache base, or nil when the spool cannot be made there
    /// (callers with only a `cacheDir` use the default base's spool).
    public init?(base: URL, settings: DownloadSettings, environment: [String: String]) {
        guard let served = try? Spool.served(base: base, settings: settings) else { return nil }
        served.spool.targets = RequestTargets.published(by: served.spool)
        spool = served.spool
        sharing = served.sharing
        self.settings = settings
        self.environment = environment
    }

    /// True when this node's daemon writes `repo` at `commit` into `directory` (`RequestTargets`):
    /// inside the cache base or a huggingface_hub cache it was given, or a directory whose
    /// manifest (written before the hand-over) names them. A caller hands over nothing else.
    public func accepts(_ directory: ModelDirectory, repo: String, commit: String) -> Bool {
        spool.targets?.refusal(modelDir: directory.path, layout: directory.layoutName, repo: repo, commit: commit) == nil
    }

    /// True while a supervisor's heartbeat is fresh in this spool.
    public var daemonServes: Bool { spool.anySupervisorServes() }

    /// Writes `request` into the spool: the daemon (now or later) fetches it.
    public func submit(_ request: SpoolRequest) throws { try spool.submit(request) }

    /// The request for `repo` asked for most recently, if any.
    public func latestRequest(for repo: String) -> SpoolRequest? {
        spool.requests().filter { $0.repo == repo }.max { spool.lastAsked($0.id) < spool.lastAsked($1.id) }
    }

    /// Splices parts a daemon (or a dead worker) left for these files before the embedded
    /// engine starts, so no published byte is fetched again; a gone worker's unfinished part
    /// becomes its range's recorded partial bytes.
    public func adopt(_ files: [RepoFile], commit: String, directory: ModelDirectory) {
        for file in files {
            let key = PlannedFile.key(modelDir: directory.path, path: file.path, commit: commit)
            if let plan = spool.plannedFile(key) { Splicer(spool: spool).splice(plan, salvagingTempParts: true) }
        }
    }

    /// After the embedded engine finished these files: forget their jobs, settle requests.
    public func retirePlans(_ files: [RepoFile], commit: String, directory: ModelDirectory) {
        for file in files {
            let key = PlannedFile.key(modelDir: directory.path, path: file.path, commit: commit)
            if let plan = spool.plannedFile(key), directory.isComplete(file) { spool.dropPlan(plan) }
            spool.clearFailure(key)
        }
        Splicer(spool: spool).settleRequests()
    }

    /// Blocks until the request is done (returns) or failed (throws), reporting progress from
    /// the staging sidecars and the parts. Splices parts nobody else takes care of (no live
    /// supervisor, or left for two seconds): any process may. Cancelling stops only the
    /// waiting; the transfer goes on in the daemon. With `progress` it also wakes on every
    /// published part to report it; plain waiters wake only on completion, failure, or their poll.
    /// `takesOver`: the caller finishes the transfer itself when the daemon is gone
    /// (`noDaemon`), so a killed local daemon is reported at once instead of after a lease.
    public func waitFor(_ request: SpoolRequest, timeout: Double? = nil, takesOver: Bool = false,
                 progress: (@Sendable (TransferProgress) -> Void)? = nil,
                 isCancelled: @escaping @Sendable () -> Bool = { false }) throws {
        let watcher = DirectoryWatcher.shared
        // Woken by the markers (and the supervisors' records when it takes over), not by every
        // part: progress is read on a half-second timer, so a waiter's looks at the spool do not
        // grow with the ranges (each look lists parts/ and reads the sidecars).
        let folders: [SpoolLayout.Folder] = [.done, .failed] + (takesOver ? [.supervisors] : [])
        for folder in folders { watcher?.watch(spool.layout.path(folder)) }
        // The full pass (orphans, supervisor liveness): `SpoolSharing.waiterPoll`.
        let poll = sharing.waiterPoll(watching: watcher != nil)
        let live = progress == nil ? nil : LiveProgress(spool: spool)
        let splicer = Splicer(spool: spool)
        // On the monotonic clock: a wall clock set back or forward must not stretch or cut --timeout.
        let deadline = timeout.map { MonotonicClock.seconds() + $0 }
        let total = request.files.reduce(Int64(0)) { $0 + $1.size }
        var supervisorSeen = Date()
        var firstPass = true
        var lastFull = Date.distantPast
        var rate = RateMeter()
        let wakeWord = watcher == nil ? spool.wakeWord() : nil  // without inotify, sleep on the word
        // Another node's marker wakes this waiter within a quarter poll interval, not a whole one.
        let look = sharing.settledLookInterval(watching: watcher != nil).map { SettledLook(spool: spool, id: request.id, every: $0) }
        defer { look?.stop() }
        Handoff.waiters.withLock { $0 += 1 }
        defer { Handoff.waiters.withLock { $0 -= 1 } }
        var woken = true
        var shown: Int64 = 0
        while true {
            // The markers first (two access(2) calls): a wake-up that finds the request settled
            // costs next to nothing, which matters when hundreds of waiters wake at once.
            // One look at the supervisors per pass (this node's first: a pid check while it runs).
            var supervised: Bool?
            // While this node's own supervisor runs (a pid check), it plans, splices and settles
            // this request: its done or failed marker is a local write that wakes this waiter
            // through inotify, and its parts are spliced within half a second. The waiter then
            // looks at no parts and at the markers only when woken and on the full pass.
            let own = watcher != nil && spool.ownSupervisorServes()
            // The full pass (orphans, the supervisors' liveness) once per poll; a progress tick
            // or a marker's wake-up in between looks at the markers only.
            let full = progress == nil || firstPass || Date().timeIntervalSince(lastFull) >= Double(poll)
            if full { lastFull = Date() }
            if full, spool.state(of: request.id) == .active {
                // Its record was unreadable and went to corrupt/ (docs/protocol.md): this
                // process knows the request whole, so it asks again rather than wait on nothing.
                // The spool itself may have been deleted (its daemon stops then): its folders are
                // made again first.
                if !spool.hasRequest(request.id) {
                    try SpoolTrust.prepare(spool.layout)
                    try spool.submit(request)
                }
                supervised = own || spool.anySupervisorServes()
                if !own && spool.hasOrphanParts(olderThan: 2, supervised: supervised) {
                    splicer.spliceAll()
                } else if firstPass || supervised == false {
                    splicer.settleRequests()  // files may be final with nobody left to say so
                }
            }
            firstPass = false
            let alone = Handoff.waiters.withLock { $0 } == 1
            switch full || woken || !own || !alone ? spool.state(of: request.id) : .active {
            case .done:
                progress?(TransferProgress(completedBytes: total, totalBytes: total, filesDone: request.files.count,
                                           filesTotal: request.files.count))
                return
            case .failed(let reason):
                throw HandoffError.requestFailed(repo: request.repo, reason: reason)
            case .active:
                break
            }
            // Plain waiters (`speech wait`) show no progress: they skip reading the sidecars.
            if let progress {
                // One listing of parts/ and the sidecars of the files not final (the filer),
                // and this node's ranges in flight (RAM: LiveProgress).
                // (Without parts, a range between its publication and its splice is not counted
                // for that moment: what is shown never goes back.)
                var report = RequestProgress.of(request, parts: own ? [:] : spool.partsByFile(), live: live?.read() ?? [:])
                shown = max(shown, report.completedBytes)
                report.completedBytes = shown
                report.bytesPerSecond = rate.add(report.completedBytes)
                progress(report)
            }
            if isCancelled() { throw CancellationError() }
            if !full {
                // between full passes: nothing to judge
            } else if supervised ?? spool.anySupervisorServes() {
                supervisorSeen = Date()
            } else if takesOver || Date().timeIntervalSince(supervisorSeen) > settings.lease {
                // No daemon serves the spool any more. A caller that can finish the transfer
                // itself does so at once: this node's daemon retires its heartbeat when it drains
                // (SIGTERM) and a killed one's pid is seen dead; a foreign node's counts as live
                // until its heartbeat is a lease old. A plain waiter gives a restarting daemon a lease.
                throw HandoffError.noDaemon(repo: request.repo, spool: spool.root)
            }
            if let deadline, MonotonicClock.seconds() >= deadline { throw HandoffError.timedOut(repo: request.repo) }
            var seconds = Double(deadline.map { max(1, min(poll, Int(($0 - MonotonicClock.seconds()).rounded(.up)))) } ?? poll)
            if progress != nil { seconds = min(seconds, 0.5) }
            woken = true
            if let watcher {
                woken = watcher.wait(seconds: seconds)
            } else if let wake = wakeWord {
                // No inotify for this process (e.g. the per-user limit of instances, 128 by
                // default, is used up by other waiters): sleep on the spool's wake word, which
                // whoever publishes a marker bumps (any request's: then look and sleep again).
                // Ctrl-C ends the sleep (EINTR, StopSignal's handler), as on the inotify path.
                let until = MonotonicClock.seconds() + Double(seconds)
                while !isCancelled() {
                    let generation = wake.generation  // before the check: a bump after it ends the nap
                    let left = until - MonotonicClock.seconds()
                    guard left > 0, spool.state(of: request.id) == .active else { break }
                    wake.wait(whileGeneration: generation, seconds: left)
                }
            } else {
                // Neither: check the markers every 50 ms (two access(2) calls), the full pass at
                // the poll interval.
                let until = MonotonicClock.seconds() + Double(seconds)
                while MonotonicClock.seconds() < until && spool.state(of: request.id) == .active && !isCancelled() {
                    usleep(50_000)
                }
            }
        }
    }

    /// Starts `speech-fetchd` for a cache base in its own session, logging to the spool
    /// (`--log`: SIGHUP reopens the file).
    /// `discretionary` starts it (and so its workers) at nice 10.
    /// - Returns: the daemon's pid and its log file.
    @discardableResult
    public func startDaemon(executable: String, base: URL, discretionary: Bool = false) throws -> StartedDaemon {
        let logPath = spool.layout.daemonLog(settings.node)
        let fd = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o600)
        let logHandle = fd >= 0 ? FileHandle(fileDescriptor: fd, closeOnDealloc: true) : FileHandle.nullDevice
        let process = Process()
        let setsid = "/usr/bin/setsid"
        let nice = "/usr/bin/nice"
        // The daemon reopens its log on SIGHUP (logrotate); until it opens it, what it says
        // (a usage error) goes there through the descriptor given here.
        var command = [executable, "--cache-base", base.path, "--log", logPath]
        if discretionary && FileManager.default.isExecutableFile(atPath: nice) { command = [nice, "-n", "10"] + command }
        if FileManager.default.isExecutableFile(atPath: setsid) { command = [setsid] + command }
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = logHandle
        process.standardError = logHandle
        try process.run()
        // Wait for its heartbeat, so a following `speech wait` sees it.
        let deadline = Date().addingTimeInterval(10)
        while spool.liveSupervisors().isEmpty {
            guard Date() < deadline, process.isRunning else { throw HandoffError.daemonDidNotStart(log: logPath) }
            usleep(20_000)
        }
        // setsid forks when it leads a process group already: the daemon's own pid is the one
        // its heartbeat names.
        let pid = spool.supervisorPID(of: settings.node) ?? process.processIdentifier
        return StartedDaemon(pid: pid, log: logPath)
    }
}

/// Bytes per second over the last few seconds, from byte counts seen at irregular instants
/// (a waiter reports when a part is published, not per received byte).
struct RateMeter {
    private var samples: [(time: Double, bytes: Int64)] = []
    private let window = 5.0

    /// Records the count now; returns the rate over the window (0 until two samples differ).
    mutating func add(_ bytes: Int64, now: Double = Date().timeIntervalSinceReferenceDate) -> Double {
        samples.append((now, bytes))
        while samples.count > 2, now - samples[1].time >= window { samples.removeFirst() }
        guard let first = samples.first, now - first.time > 0.05 else { return 0 }
        return Double(max(0, bytes - first.bytes)) / (now - first.time)
    }
}

/// How a hand-over to the daemon failed, as its caller sees it.
public enum HandoffError: Error, Sendable, CustomStringConvertible {
    /// The daemon could not fetch the request (404, gated, checksum mismatch after retries…).
    case requestFailed(repo: String, reason: String)
    case timedOut(repo: String)
    /// A request waits in the spool but no speech-fetchd has served the base for a lease.
    case noDaemon(repo: String, spool: String)
    /// `--detach` started speech-fetchd but it never came up.
    case daemonDidNotStart(log: String)

    public var description: String {
        switch self {
        case .requestFailed(let repo, let reason):
            return "the download of \(repo) failed: \(reason)"
        case .noDaemon(let repo, let spool):
            return "\(repo) is requested in \(spool) but no speech-fetchd serves it; start `speech-fetchd --cache-base …` or run `speech download \(repo)` to fetch it in this process"
        case .daemonDidNotStart(let log):
            return "speech-fetchd did not start; see \(log)"
        case .timedOut(let repo):
            return "timed out waiting for \(repo); the transfer goes on"
        }
    }
}
