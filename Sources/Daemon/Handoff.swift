// Handoff - a caller's side of the spool: hand a request to the daemon and wait for it,
// adopt what a daemon left behind, start a daemon for `--detach`.
import ByteUnits
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
        served.spool.endpoints = EndpointPolicy.published(by: served.spool)
        spool = served.spool
        sharing = served.sharing
        self.settings = settings
        self.environment = environment
    }

    /// True when this node's daemon writes `repo` at `commit` into `directory` (`RequestTargets`):
    /// inside the cache base or a huggingface_hub cache it was given, or a directory whose
    /// manifest (written before the hand-over) names them. A caller hands over nothing else.
    public func accepts(_ directory: ModelDirectory, repo: String, commit: String) -> Bool {
        spool.targets?.refusal(modelDir: directory.path, layout: directory.layout, repo: repo, commit: commit) == nil
    }

    /// Why this node's daemon would not fetch a request resolved against `endpoint` (docs/protocol.md,
    /// "Endpoints"), in one line for the caller's stderr; nil when it would. A daemon that has not
    /// said which Hubs it fetches from is not handed anything.
    public func endpointRefusal(repo: String, endpoint: String) -> String? {
        guard let policy = spool.endpoints else {
            return "the speech-fetchd serving \(spool.root) has not said which Hub it fetches from; this process fetches \(repo) itself"
        }
        guard !policy.allows(endpoint) else { return nil }
        return "the speech-fetchd serving \(spool.root) fetches from \(policy.own), not \(endpoint) (HF_ENDPOINT); this process "
            + "fetches \(repo) itself (speech-fetchd --allow-endpoint \(endpoint) would let the daemon fetch it)"
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
        let waitStarted = Date()
        var unplannedLooked = false
        var firstPass = true
        var lastFull = Date.distantPast
        var rate = RateMeter()
        // The wake word: this node's supervisor bumps it when the spool's generation moves (every
        // marker's publisher bumps that), and a local publisher of a marker bumps it too. A waiter
        // whose own node's supervisor runs sleeps on it; one without inotify sleeps on it as well.
        let wakeWord = spool.wakeWord(for: .waiters)
        // While this node's supervisor runs, what the shared filesystem says (markers, sidecars,
        // final files, the request's record) is read on `SharedLooks`' lengthening interval and
        // when the word moves, not on every tick: a node that only waits pays per request, not
        // per range or per second (docs/protocol.md, "Hosts").
        // A waiter that shows no progress looks only for its markers and its request's record,
        // which its node's supervisor wakes it for: its safety looks start at 3 s, not 1 s.
        var shared = SharedLooks(least: progress == nil ? SharedLooks.leastWithoutProgress : 1)
        var sharedProgress: RequestProgress.Shared?
        // Another node's marker wakes this waiter within a quarter poll interval, not a whole one,
        // where no supervisor of this node does it (SettledLook, made when first needed).
        let lookInterval = sharing.settledLookInterval(watching: watcher != nil)
        var look: SettledLook?
        defer { look?.stop() }
        Handoff.waiters.withLock { $0 += 1 }
        defer { Handoff.waiters.withLock { $0 -= 1 } }
        var woken = true
        var shown: Int64 = 0
        var wordSeen = wakeWord?.generation ?? 0
        var wordFollowed = Date()
        var judgePending = true  // the first pass judges
        while true {
            // The markers first (two access(2) calls): a wake-up that finds the request settled
            // costs next to nothing, which matters when hundreds of waiters wake at once.
            // One look at the supervisors per pass (this node's first: a pid check while it runs).
            var supervised: Bool?
            // While this node's own supervisor runs (a pid check), it plans, splices and settles
            // this request, and wakes this waiter through the word when anything changed: a
            // marker of this node or another node's. The waiter then looks at no parts, and at the
            // markers only when woken and on the shared looks' interval.
            let own = spool.ownSupervisorServes()
            let ownWakes = own && wakeWord != nil
            if ownWakes {
                look?.stop()
                look = nil
            } else if look == nil, let lookInterval {
                look = SettledLook(spool: spool, id: request.id, every: lookInterval)
            }
            let now = Date()
            // This node's ranges of the request in flight, and those it published in the last
            // `LiveProgress.landedSeconds`, whole (RAM): the bytes shown grow as this node's
            // workers fetch, with no look at the shared layer as each range lands (in a herd every
            // node fetches its share, and a look at every tick while it did was the markers, the
            // final file and the sidecar, per node and half second).
            let liveNow = live?.read() ?? [:]
            let sharedDue = !ownWakes || shared.due(now: now)
            if sharedDue { shared.looked(now: now) }
            // The full pass (orphans, the supervisors' liveness) once per poll; a progress tick
            // or a marker's wake-up in between looks at the markers only.
            let full = progress == nil || firstPass || now.timeIntervalSince(lastFull) >= Double(poll)
            if full { lastFull = now }
            if let wakeWord {
                // Before the markers: a bump after it ends the sleep. A bump between the last
                // sleep's timeout and this read is a wake-up too (else it would be slept through).
                let word = wakeWord.generation
                if word != wordSeen { woken = true }
                wordSeen = word
            }
            let alone = Handoff.waiters.withLock { $0 } == 1
            // A shared look that fell between full passes is judged at the next full pass, not
            // dropped (a progress waiter's ticks and its shared looks rarely coincide).
            if sharedDue { judgePending = true }
            let judges = full && judgePending
            if judges { judgePending = false }
            let looksAtMarkers = judges || (ownWakes ? woken : (woken || !own || !alone))
            // One look at the two markers serves both the full pass and the verdict below.
            let state = looksAtMarkers ? spool.state(of: request.id) : .active
            if judges, state == .active {
                supervised = try judgeActive(request, own: own, firstPass: firstPass, splicer: splicer, poll: poll,
                                             waitStarted: waitStarted, unplannedLooked: &unplannedLooked)
            }
            firstPass = false
            switch judges && state == .active && !own ? spool.state(of: request.id) : state {
            case .done:
                progress?(TransferProgress(completedBytes: total, totalBytes: total, filesDone: request.files.count,
                                           filesTotal: request.files.count))
                return
            case .failed(let failure):
                throw HandoffError.requestFailed(repo: request.repo, kind: failure.kind, reason: failure.reason)
            case .active:
                break
            }
            // Plain waiters (`speech wait`) show no progress: they skip reading the sidecars.
            if let progress {
                reportProgress(progress, request, own: own, sharedDue: sharedDue, liveNow: liveNow,
                               sharedProgress: &sharedProgress, shown: &shown, rate: &rate)
            }
            if isCancelled() { throw CancellationError() }
            if full {  // is the spool still served? (between full passes: nothing to judge)
                try checkServed(request, supervised: supervised ?? (own || spool.anySupervisorServes()), takesOver: takesOver,
                                supervisorSeen: &supervisorSeen)
            }
            if let deadline, MonotonicClock.seconds() >= deadline { throw HandoffError.timedOut(repo: request.repo) }
            let seconds = napLength(deadline: deadline, poll: poll, showsProgress: progress != nil,
                                    untilSharedLook: ownWakes ? shared.untilDue(now: Date()) : nil)
            woken = sleep(request, seconds: seconds, ownWakes: ownWakes, wakeWord: wakeWord, watcher: watcher,
                          wordSeen: wordSeen, wordFollowed: &wordFollowed, isCancelled: isCancelled)
        }
    }

    /// A full pass's look at the daemon: `supervisorSeen` moves on while one serves the spool;
    /// `noDaemon` when none does any more.
    private func checkServed(_ request: SpoolRequest, supervised: Bool, takesOver: Bool, supervisorSeen: inout Date) throws {
        if supervised {
            supervisorSeen = Date()
        } else if takesOver || Date().timeIntervalSince(supervisorSeen) > settings.lease {
            // No daemon serves the spool any more. A caller that can finish the transfer
            // itself does so at once: this node's daemon retires its heartbeat when it drains
            // (SIGTERM) and a killed one's pid is seen dead; a foreign node's counts as live
            // until its heartbeat is a lease old. A plain waiter gives a restarting daemon a lease.
            throw HandoffError.noDaemon(repo: request.repo, spool: spool.root)
        }
    }

    /// How long a waiter sleeps before its next pass: the poll (at least 1 s, at most what is
    /// left of the deadline), half a second for a progress waiter, and no longer than the time
    /// to the next shared look (at least 50 ms) while this node's supervisor wakes it.
    private func napLength(deadline: Double?, poll: Int, showsProgress: Bool, untilSharedLook: Double?) -> Double {
        var seconds = Double(deadline.map { max(1, min(poll, Int(($0 - MonotonicClock.seconds()).rounded(.up)))) } ?? poll)
        if showsProgress { seconds = min(seconds, 0.5) }
        if let untilSharedLook { seconds = min(seconds, max(0.05, untilSharedLook)) }
        return seconds
    }

    /// A full pass's judgement of a request still active: asks again for one whose record was
    /// set aside, announces again one nobody planned, and splices or settles what nobody else
    /// will. Returns whether a supervisor serves the spool.
    private func judgeActive(_ request: SpoolRequest, own: Bool, firstPass: Bool, splicer: Splicer, poll: Int,
                             waitStarted: Date, unplannedLooked: inout Bool) throws -> Bool {
        // Its record was unreadable and went to corrupt/ (docs/protocol.md): this
        // process knows the request whole, so it asks again rather than wait on nothing.
        // The spool itself may have been deleted (its daemon stops then): its folders are
        // made again first.
        if !spool.hasRequest(request.id) {
            try SpoolTrust.prepare(spool.layout)
            try spool.submit(request)
        } else if !unplannedLooked, Date().timeIntervalSince(waitStarted) >= 2 * Double(poll) {
            // Asking again for a request in flight bumps no generation (docs/protocol.md):
            // if its first asker died between publishing it and bumping, no supervisor
            // of another node heard of it. Once per wait, after two polls: a request with
            // no file planned or final is announced again (a look at each file's plan).
            unplannedLooked = true
            let directory = request.directory
            let untouched = request.files.allSatisfy { file in
                !directory.isComplete(file)
                    && spool.lookPlan(PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)).isAbsent
            }
            if untouched { spool.bumpGeneration() }
        }
        let supervised = own || spool.anySupervisorServes()
        if !own && spool.hasOrphanParts(olderThan: 2, supervised: supervised) {
            splicer.spliceAll()
        } else if firstPass || supervised == false {
            splicer.settleRequests()  // files may be final with nobody left to say so
        }
        return supervised
    }

    /// One progress report of a waiter: the shared layer when due, this node's ranges in flight
    /// always; what is shown never goes back.
    private func reportProgress(_ progress: @Sendable (TransferProgress) -> Void, _ request: SpoolRequest, own: Bool,
                                sharedDue: Bool, liveNow: [String: Int64], sharedProgress: inout RequestProgress.Shared?,
                                shown: inout Int64, rate: inout RateMeter) {
        // The shared layer (one listing of parts/ unless this node's supervisor splices
        // them, the sidecars of the files not final) when due; this node's ranges in
        // flight (RAM: LiveProgress) at every tick.
        // (Without parts, a range between its publication and its splice is not counted
        // for that moment: what is shown never goes back.)
        if sharedDue || sharedProgress == nil {
            sharedProgress = RequestProgress.shared(request, parts: own ? [:] : spool.partsByFile())
        }
        var report = RequestProgress.with(sharedProgress!, live: liveNow)
        shown = max(shown, report.completedBytes)
        report.completedBytes = shown
        report.bytesPerSecond = rate.add(report.completedBytes)
        progress(report)
    }

    /// A waiter's sleep of up to `seconds`: on the wake word while this node's supervisor wakes it,
    /// else on inotify, else on the word or a 50 ms look at the markers. Returns whether it was
    /// woken (true where it cannot tell).
    private func sleep(_ request: SpoolRequest, seconds: Double, ownWakes: Bool, wakeWord: WakeWord?, watcher: DirectoryWatcher?,
                       wordSeen: UInt32, wordFollowed: inout Date, isCancelled: () -> Bool) -> Bool {
    if ownWakes, let wake = wakeWord {
        // This node's supervisor wakes the word for every change another node made, and
        // a local marker's publisher for its marker. The path is looked up again (a
        // replaced file is followed) every 10 s, not at every tick.
        let follow = Date().timeIntervalSince(wordFollowed) >= 10
        if follow { wordFollowed = Date() }
        return wake.wait(whileGeneration: wordSeen, seconds: seconds, followingReplacement: follow)
    } else if let watcher {
        return watcher.wait(seconds: seconds)
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
        return true
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

/// When a waiter whose own node's supervisor runs reads the shared filesystem (markers, sidecars,
/// final files) without being woken: every second at first, then at a third of the time waited
/// so far, at most every 15 s. A wait of T seconds makes about 3 + 3 ln(T / 3) such looks up to
/// 45 s (a 10 s wait 7, 45 s 11), then one each 15 s; a wake-up (a marker, another node's
/// change) is looked at whenever it comes. A waiter that shows no progress starts at every 3 s
/// (`leastWithoutProgress`: a 10 s wait about 4 looks).
struct SharedLooks {
    private let start = Date()
    private var last = Date.distantPast
    /// The shortest interval between looks.
    let least: Double
    static let leastWithoutProgress = 3.0

    init(least: Double = 1) { self.least = least }

    func interval(now: Date) -> Double { min(15, max(least, now.timeIntervalSince(start) / 3)) }
    func due(now: Date) -> Bool { now.timeIntervalSince(last) >= interval(now: now) }
    func untilDue(now: Date) -> Double { interval(now: now) - now.timeIntervalSince(last) }
    mutating func looked(now: Date) { last = now }
}
