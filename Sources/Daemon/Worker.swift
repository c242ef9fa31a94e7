// Worker - one worker process of speech-fetchd: each of its slots claims a range job, fetches
// it into a part, hands the part to be synced and published, and goes back for the next job.
import FileEvents
import Foundation
import HubClient
import HubTypes
import ModelCache
import SharedFiles
import Spool
import Transfer

public final class Worker: @unchecked Sendable {
    public let spool: Spool
    let sharing: SpoolSharing
    /// One fetcher per slot (per Hub it fetches from): each slot transfers one range at a time on its own connection.
    let fetchers: [SlotFetchers]
    let settings: DownloadSettings
    let log: @Sendable (String) -> Void
    /// Claim only jobs planned for requests made on this node.
    let ownRequestsOnly: Bool
    /// Syncs and publishes finished parts while the worker fetches its next range.
    private let publisher = DispatchQueue(label: "speech-fetch.worker.publish")
    /// The RAM records of ranges this process published, kept whole for this node's waiters
    /// (`LiveProgress.landedSeconds`); the rest are removed when the process exits, so a drained
    /// node leaves none behind.
    private let landedLock = NSLock()
    private var landedRecords: [LiveProgress.Entry] = []
    /// Set (to 1) by the supervisor in the environment of the one worker process of a node that
    /// looks for endgame races on a timer while another node holds claims; the others look only
    /// when woken.
    public static let endgameLookerVariable = "SPEECH_FETCH_ENDGAME_LOOKER"
    /// This process makes the node's timed endgame looks (a worker started without a supervisor,
    /// as tests do, does).
    private let timedEndgameLooks: Bool
    /// Set to 0 to fetch every range into a part of its own, copied into the staging file by the
    /// splicer, as before ranges were written in place (docs/protocol.md, "Ranges written in place").
    public static let rangesInPlaceVariable = "SPEECH_FETCH_RANGES_IN_PLACE"
    /// Ranges are written in place unless `SPEECH_FETCH_RANGES_IN_PLACE=0`. On a network or FUSE
    /// filesystem the splicer's reads of the staging file go around the client's cache
    /// (`O_DIRECT`): a GlusterFS client served, for about a second, pages it had read before
    /// another node wrote them.
    private let writesInPlace: Bool

    /// Where idle slots sleep: woken by inotify, the wake word, or a part this process published
    /// (its claim is gone, so this node's share has room again).
    private let wakeup = Wakeup()
    /// The bytes of this process's ranges in flight, in RAM for this node's waiters (LiveProgress).
    let live: LiveProgress?
    /// The last listing of `jobs/ready`, shared with this machine's other worker processes
    /// (ReadyView); set by `run` before the slots start, and only when the wake word works (it
    /// is what tells this process that another node published jobs).
    var readyView: ReadyView?

    /// - Parameter slots: ranges this process transfers at once (threads). A few slots per
    ///   process keep the pool's memory small; a dead process loses its slots' ranges.
    public init(cacheBase: URL, environment: [String: String] = ProcessInfo.processInfo.environment,
                slots: Int = 1, ownRequestsOnly: Bool = false, log: @escaping @Sendable (String) -> Void) throws {
        self.ownRequestsOnly = ownRequestsOnly
        timedEndgameLooks = environment[Worker.endgameLookerVariable].map { $0 == "1" } ?? true
        let settings = DownloadSettings.fromEnvironment(environment)
        self.settings = settings
        (spool, sharing) = try Spool.served(base: cacheBase, settings: settings)
        writesInPlace = environment[Worker.rangesInPlaceVariable] != "0"
        spool.targets = RequestTargets.daemon(base: cacheBase, environment: environment)
        spool.endpoints = EndpointPolicy.daemon(environment: environment)
        live = LiveProgress(spool: spool)
        nodeNamesView = NodeNamesView(spool: spool)
        // Workers use the credential of the node they run on, never one from the spool.
        let client = HubClient.fromEnvironment(environment, retry: settings.retry, stallTimeout: settings.stallTimeout)
        fetchers = try (0..<max(1, slots)).map { _ in SlotFetchers(own: try RangeFetch(client: client, settings: settings)) }
        self.log = log
    }

    /// Works until `shouldStop` turns true, or the supervisor that started it is gone.
    public func run(shouldStop: @escaping @Sendable () -> Bool) {
        let parent = getppid()
        let done: @Sendable () -> Bool = { shouldStop() || getppid() != parent }
        let poll = sharing.workerPoll
        let wakeup = self.wakeup
        let word = spool.wakeWord(for: .slots)
        let view = word == nil ? nil : ReadyView(spool: spool)
        readyView = view
        // One thread sleeps on inotify (libinotifytools allows one watcher per process) and
        // wakes the idle slots. Jobs become claimable when their plan is published (after the
        // jobs): watch both folders.
        let watcher = Thread { [spool] in
            let watcher = DirectoryWatcher.shared
            // New jobs and plans only: a claim taking a job (a touch, then a rename out) wakes no one.
            watcher?.watch(spool.layout.path(.ready), arrivalsOnly: true)
            watcher?.watch(spool.layout.path(.plans), arrivalsOnly: true)
            while !done() {
                guard watcher?.wait(seconds: 1) ?? { sleep(1); return false }() else { continue }
                view?.invalidate()  // a job or plan arrived: the shared listing is stale
                // A planner publishes a file's jobs one by one (a 1 GiB file: 128 in ~0.2 s), and
                // none is claimable before its plan follows them: the slots look once the burst
                // has had 20 ms to land, not once per job (16 slots scanning per job slowed it).
                // Jobs alone (no plan among the arrivals) wait a quarter second: they are the
                // first of a burst whose plan follows, or a range given back.
                let readyOnly = watcher?.takeChanged() == [spool.layout.path(.ready)]
                usleep(readyOnly ? 250_000 : 20_000)
                wakeup.broadcast()
            }
            wakeup.broadcast()
        }
        watcher.start()
        // Where inotify cannot report a new job (another node's plan or revocation on a network
        // filesystem, or no inotify instance), this node's supervisor can: it looks at the spool's
        // generation once per poll and, when it moved, bumps the wake word this thread sleeps on
        // (a futex: no look at the shared filesystem while nothing happens).
        if let word {
            Thread {
                var seen = word.generation
                var sinceReplacementLook = Date()
                while !done() {
                    // The file is looked up again (replaced?) once a minute, not at every nap.
                    let follow = Date().timeIntervalSince(sinceReplacementLook) >= 60
                    if follow { sinceReplacementLook = Date() }
                    guard word.wait(whileGeneration: seen, seconds: 1, followingReplacement: follow) else { continue }
                    let now = word.generation
                    if now != seen {
                        seen = now
                        view?.invalidate(forWord: now)  // another node's change may have made jobs ready
                        wakeup.broadcast()
                    }
                }
            }.start()
        }
        let finished = DispatchGroup()
        for fetcher in fetchers {
            finished.enter()
            Thread.detachNewThread { [self] in
                slot(fetcher, poll: poll, wakeup: wakeup, done: done)
                finished.leave()
            }
        }
        finished.wait()
        publisher.sync {}  // parts in hand are published before the worker exits
        for record in landedLock.withLock({ landedRecords }) { record.remove() }
    }

    /// One slot: claims the lowest ready range it may take, fetches it, and goes back for the
    /// next. An idle slot sleeps until woken (a new job here or on another node, through inotify
    /// or the wake word); it looks again by itself only while something is pending that may
    /// change without a wake-up: ready jobs beyond this node's share, or another node's claims
    /// (one may stall, and the endgame races it).
    /// One slot: claims the lowest ready range it may take, fetches it, and goes back for the
    /// next. An idle slot sleeps until woken (a new job here or on another node, through inotify
    /// or the wake word); it looks again by itself only while another node holds claims (one may
    /// stall, and the endgame races it), once per poll for the whole process.
    private func slot(_ fetcher: SlotFetchers, poll: Int, wakeup: Wakeup, done: @escaping @Sendable () -> Bool) {
        var seen = -1
        var afterWork = false
        while !done() {
            let ticket = wakeup.ticket()
            let timed = timedEndgameLooks && looks.othersHoldClaims
            guard ticket != seen || afterWork || timed else {
                wakeup.wait(after: ticket, seconds: 1)
                continue
            }
            seen = ticket
            if let claimed = claimNext(ticket: ticket, afterWork: afterWork) {
                work(claimed, fetcher: fetcher, shouldStop: done)
                afterWork = true
                continue
            }
            afterWork = false
            // Endgame: nothing is ready, and another node is far behind on a range while its link
            // is shared by more ranges than ours: fetch it too; the first part published wins.
            // One process of a node looks (`timedEndgameLooks`), and of the nodes with no claim
            // only one looks further than the claims' listing (`EndgameLookers`): the looks'
            // cost does not grow with the nodes.
            if settings.endgame, timedEndgameLooks,
               looks.mayLookForEndgame(ticket: wakeup.externalTicket(), every: looks.endgameEvery) {
                let nodes = liveNodeNames()
                let endgame = spool.endgameLook(lookFurther: { holders in
                    EndgameLookers.looks(self.settings.node, nodes: nodes, holders: holders)
                })
                let racing = EndgameLookers.looks(settings.node, nodes: nodes, holders: endgame.holders)
                looks.endgameEvery = racing ? max(2, Double(poll)) : LeaseJudge.refreshInterval(lease: settings.lease, atLeast: 2)
                // Timed looks only while this node's own link is idle (it holds no claim): a node with
                // ranges in flight looks again when woken or when its ranges are done.
                looks.othersHoldClaims = endgame.othersHoldClaims && endgame.mine == 0
                looks.endgameLookDone()
                if let lagging = endgame.lagging, let duplicate = spool.duplicate(lagging) {
                    log("endgame: racing \(lagging.node) for \(duplicate.plan.file.path) part \(duplicate.index) (\(lagging.remaining) bytes left there)")
                    work(duplicate, fetcher: fetcher, shouldStop: done)
                    afterWork = true
                    continue
                }
            }
            wakeup.wait(after: ticket, seconds: 1)
        }
    }

    // The claim scan's memory (WorkerClaims).

    /// Where this process's scans start among the lowest ready jobs: every slot of every node
    /// reading one listing and trying the lowest job first would collide on it (each loser's
    /// try is a lookup of a name that is gone, at the file server); each process starts at its
    /// own place (a hash of its node and pid) and goes round.
    lazy var scanStart = Int(EndgameLookers.rank(spool.owner.description) % 1_000_003)

    /// What this process's slots found at their last looks.
    let looks = SlotLooks()

    let claimLock = NSLock()

    /// The nodes with a supervisor record, listed at most every few seconds, by one worker
    /// process of the machine for all of them (NodeNamesView).
    let nodeNamesView: NodeNamesView?
    let nodesLock = NSLock()
    var nodesSeen: (names: [String], at: Date) = ([], .distantPast)

    /// Range lengths by job, from the plans read so far: for the share estimate only (a file
    /// planned anew under the same key may have another range size; the fetch itself uses the
    /// plan `Spool.claim` reads).
    let plansLock = NSLock()
    var plans: [String: PlannedFile] = [:]

    private func work(_ claim: ClaimedJob, fetcher: SlotFetchers, shouldStop: @escaping @Sendable () -> Bool) {
        let plan = claim.plan
        if plan.kind == .xet {
            workXet(claim, fetcher: fetcher, shouldStop: shouldStop)
            return
        }
        // The range is written straight into the staging file where it can be (its part is then
        // a record of the bytes in place, not a copy of them); else into a part of its own.
        let staged = writesInPlace ? self.spool.openStagedRange(claim) : nil
        let temp = staged.map { self.spool.partTempPath(claim, staged: $0) } ?? self.spool.partTempPath(claim)
        let range = plan.range(claim.index)
        var lastRefresh = Date()
        var lastLook = Date()
        var revoked = false
        let spool = self.spool
        let lease = settings.lease
        // Until the part is published (or given up), this node's waiters see its bytes.
        let entry = live?.begin(job: plan.jobName(claim.index))
        var handedToPublisher = false
        defer { if !handedToPublisher { entry?.remove() } }
        // However the claim ends, the machine's count of its claims (ReadyView) stops counting it:
        // the node's share has room again without a listing. A duplicate is no claim.
        let readyView = claim.duplicateOf == nil ? self.readyView : nil
        defer { if !handedToPublisher { readyView?.claimEnded() } }
        do {
            let repo = try RepoID(plan.repo)
            let fetcher = try fetcher.fetcher(for: plan.endpoint)
            // A part a killed claimant of this range left behind is adopted: only its tail is fetched.
            // Only a job that came back after a claim can have one (`ClaimedJob.givenBack`).
            let adopted = claim.givenBack
                ? spool.adoptPart(claim, as: temp, rangeLength: range.end - range.start + 1, stagingTag: staged?.record.tag) : 0
            if adopted > 0 { log("\(plan.file.path) part \(claim.index): adopted \(adopted) bytes a gone worker left") }
            // The lease is refreshed while the fetch runs (as bytes arrive, and at least once a
            // second while none do: a server's pause is a live fetch); a claim that was revoked
            // meanwhile (this worker looked dead) makes the worker give the range up.
            try fetcher.fetch(plan.file, repo: repo, commit: plan.commit, start: range.start, end: range.end, into: temp,
                              staging: staged?.fd, resumeFrom: adopted, sync: false, onProgress: { held in
                                  entry?.update(held)
                                  if Date().timeIntervalSince(lastRefresh) >= LeaseJudge.refreshInterval(lease: lease) {
                                      lastRefresh = Date()
                                      revoked = !spool.refresh(claim)
                                  }
                                  // A duplicate stops once the range it races is published.
                                  if claim.duplicateOf != nil, Date().timeIntervalSince(lastLook) >= 0.25 {
                                      lastLook = Date()
                                      if spool.duplicateIsMoot(claim) { revoked = true }
                                  }
                              }, isCancelled: { revoked || shouldStop() })
            // Publish after durable: the part (or, in place, the staging file) is synced and the
            // part linked into parts/ on the publisher queue while this worker goes back to fetching. Splicing is left to the supervisor
            // (woken by the part's arrival); any other process may splice it too.
            let log = self.log
            handedToPublisher = true
            publisher.async {
                do {
                    let won = try staged.map { try spool.publishStagedRange($0, progress: temp, for: claim) }
                        ?? spool.syncAndPublishPart(temp, for: claim)
                    readyView?.claimEnded()
                    self.wakeup.broadcast(shareOnly: true)
                    let bytes = range.end - range.start + 1
                    // The range is published (by this worker or the one it raced): this node's
                    // waiters count it whole from RAM until their next shared look has (LiveProgress).
                    if let entry {
                        entry.landed(length: bytes)
                        self.landedLock.withLock { self.landedRecords.append(entry) }
                        self.publisher.asyncAfter(deadline: .now() + LiveProgress.landedSeconds) {
                            entry.remove()
                            self.landedLock.withLock { self.landedRecords.removeAll { $0 === entry } }
                        }
                    }
                    if claim.duplicateOf != nil {
                        log("endgame: \(plan.file.path) part \(claim.index) \(won ? "won" : "lost"): \(bytes) bytes fetched twice")
                    } else if !won {
                        log("endgame: \(plan.file.path) part \(claim.index) lost to a duplicate: \(bytes) bytes fetched twice")
                    }
                } catch {
                    entry?.remove()
                    log("\(plan.file.path) part \(claim.index): \(error); the range will be fetched again")
                    spool.discardPart(temp)
                    spool.unclaim(claim)
                    readyView?.claimEnded()
                }
            }
        } catch is CancellationError {
            if claim.duplicateOf != nil {
                spool.discardPart(temp)
                spool.dropClaim(claim)
                if revoked { log("endgame: \(plan.file.path) part \(claim.index) published by its claimant first; the duplicate stopped") }
            } else if revoked {
                spool.discardPart(temp)  // another claimant has the range now
            } else {
                // Stopping (drained, or the supervisor is gone): the part stays for the next
                // claimant, or a caller taking over, to adopt once this process has exited.
                spool.unclaim(claim)
            }
        } catch let error as CacheError where DiskSpace.isFull(error) {
            // A full disk is not a pause: the request fails saying what is needed and what is
            // free (as the embedded engine does), the staged bytes stay, and asking again (the
            // same command, once there is room) clears the failure and resumes from the sidecar.
            spool.discardPart(temp)
            let full = DiskSpace.explain(error, directory: plan.directory, needed: stillNeeded(plan), staged: [plan.file.path])
            log("\(plan.repo)/\(plan.file.path) bytes \(range.start)-\(range.end): \(full)")
            spool.recordFailure(plan.key, FailureRecord(.diskFull, "\(full)"))
            spool.dropClaim(claim)
            spool.dropPlan(plan)
            Splicer(spool: spool).settleRequests()
        } catch let error as CacheError {
            // A local problem (I/O): the range is not at fault. Give it back and pause.
            spool.discardPart(temp)
            log("\(plan.repo)/\(plan.file.path) bytes \(range.start)-\(range.end): \(error); giving the range back")
            spool.unclaim(claim)
            Sleep.seconds(2, unless: shouldStop)
        } catch {
            spool.discardPart(temp)
            log("\(plan.repo)/\(plan.file.path) bytes \(range.start)-\(range.end): \(error)")
            spool.recordFailure(plan.key, FailureRecord(FailureKind(fetching: error), "\(error)"))
            spool.dropClaim(claim)
            spool.dropPlan(plan)
            Splicer(spool: spool).settleRequests()
        }
    }
}

extension Worker {
    /// Bytes of a file's ranges its sidecar does not list as done (the whole file without one).
    func stillNeeded(_ plan: PlannedFile) -> Int64 {
        guard case .found(let found) = Sidecar.look(plan.file.path, in: plan.directory), let record = found,
              record.rangeSize == plan.rangeSize else { return plan.file.size }
        let done = Set(record.done)
        return (0..<plan.rangeCount).filter { !done.contains($0) }.reduce(Int64(0)) { sum, index in
            let range = plan.range(index)
            return sum + range.end - range.start + 1
        }
    }
}
