// SpoolRequests - a caller's request in the spool: submitted, listed (parsed once per record),
// settled by a done or failed marker that wakes the local waiters, and a file's recorded
// failure (docs/protocol.md, "The spool").
import Foundation
import ModelCache
import SharedFiles

extension Spool {
    /// Writes a request unless the same one exists. Returns false when it was already there.
    /// Failures recorded for its files are cleared: the caller just resolved the repo, so
    /// asking again deserves a fresh attempt.
    @discardableResult
    public func submit(_ request: SpoolRequest) throws -> Bool {
        // What other nodes must hear of (the generation): a new request, or a failure or marker
        // this one clears. Asking again for a request that is in flight changes nothing they act
        // on: when every node of a job asks for one model at once, the first asker's bump is the
        // one every node sees, not one bump per node (each a full pass on every node).
        var changed = false
        for file in request.files {
            if clearFailure(PlannedFile.key(modelDir: request.modelDir, path: file.path, commit: request.commit)) { changed = true }
        }
        let target = layout.request(request.id)
        // A request in flight that this node asks for again (every node of a job asking at once)
        // is there already: looked up first (one lookup), not written in `tmp/`, synced, linked in
        // vain and unlinked (five operations at the file server, per node).
        var fresh = SharedFS.exists(target) == true ? false : try publishRequest(request, at: target)
        if !fresh, case .corrupt(let why) = readRecord(target, decode: { decodeRequest($0, id: request.id) }) {
            // The request under this id is unreadable (truncated, garbage): it would never be
            // planned and every caller would wait on it forever. It goes to corrupt/; ask afresh.
            quarantine(target, reason: why, stillCorrupt: { self.decodeRequest($0, id: request.id) == nil })
            fresh = try publishRequest(request, at: target)
        }
        if !fresh {
            // Asked again: a failure or completion of the earlier round no longer applies, and
            // the request becomes the newest (its mtime) for waiters choosing among a repo's.
            if unlink(layout.failedMarker(request.id)) == 0 { changed = true }
            if unlink(layout.doneMarker(request.id)) == 0 { changed = true }
            SharedFS.touch(target)
        }
        forgetPassState(of: request.id)
        if fresh || changed { bumpGeneration() }
        return fresh
    }

    func publishRequest(_ request: SpoolRequest, at target: String) throws -> Bool {
        let temp = tempPath("request")
        try SpoolFS.writeNew(temp, try JSONEncoder().encode(request))
        return try SpoolFS.publishOnce(temp, as: target)
    }

    /// A request record, only when it parses and names the id its file is named after.
    func decodeRequest(_ data: Data, id: String) -> SpoolRequest? {
        guard let request = try? JSONDecoder().decode(SpoolRequest.self, from: data), request.id == id else { return nil }
        return request
    }

    /// Every readable request. One that was read but does not parse goes to `corrupt/` (with a
    /// log line) instead of being skipped on every pass while its callers wait for it.
    public func requests() -> [SpoolRequest] {
        let memo = lock.withLock { passRequestIDs }
        let ids = memo ?? (SharedFS.names(layout.path(.requests)) ?? []).compactMap(SpoolLayout.recordID)
        var (known, check) = lock.withLock {
            if inPass { passRequestIDs = ids }
            parsedRequests = parsedRequests.filter { ids.contains($0.key) }
            let check = revalidate
            revalidate = false
            return (parsedRequests, check)
        }
        if check {
            for (id, entry) in known {
                guard case .found(let st) = SharedFS.lstat(layout.request(id)), FileIdentity(st) == entry.identity else {
                    known[id] = nil
                    lock.withLock { parsedRequests[id] = nil }  // replaced or gone: read afresh
                    continue
                }
            }
        }
        return ids.compactMap { id in
            if let entry = known[id] { return entry.request }
            let path = layout.request(id)
            guard case .found(let st) = SharedFS.lstat(path),
                  let request = record(path, decode: { self.decodeRequest($0, id: id) }) else {
                lock.withLock { parsedRequests[id] = nil }
                return nil
            }
            lock.withLock { parsedRequests[id] = (request, FileIdentity(st)) }
            return request
        }
    }

    /// The requests that are neither done nor failed. With `remembersSettled`, a request found
    /// settled is not looked at again until `forgetSettled()`.
    /// `skipping`: requests the caller leaves alone, passed over before their markers are
    /// looked at (two lookups each at the file server).
    public func activeRequests(skipping: (SpoolRequest) -> Bool = { _ in false }) -> [SpoolRequest] {
        let remembered = lock.withLock { remembering ? settledIDs : [] }
        return requests().filter { request in
            guard !remembered.contains(request.id), !skipping(request) else { return false }
            guard state(of: request.id) == .active else {
                lock.withLock { if remembering { settledIDs.insert(request.id) } }
                return false
            }
            return true
        }
    }

    /// True when `request` was made on another node whose supervisor serves: that node plans,
    /// splices and settles it (a look at its heartbeat at most once per quarter lease).
    public func servedElsewhere(_ request: SpoolRequest) -> Bool { servedElsewhere(node: request.node) }

    /// True when `node` is another node whose supervisor serves (`supervisorServes`).
    public func servedElsewhere(node: String) -> Bool {
        node != owner.node && supervisorServes(node, round: leaseRound())
    }

    /// Forgets which requests were found settled (the generation moved: one may be asked again),
    /// and has the next look check that each remembered record is still the one parsed.
    public func forgetSettled() {
        lock.withLock {
            settledIDs.removeAll()
            revalidate = true
        }
    }

    /// True while a request's record is in `requests/` (it is gone when moved to `corrupt/`).
    /// False only when the request's file is positively absent (an unreadable one may be there).
    public func hasRequest(_ id: String) -> Bool { SharedFS.exists(layout.request(id)) != false }

    /// When a request was last asked for (its file's mtime), for picking a repo's newest one.
    public func lastAsked(_ id: String) -> Double { SharedFS.mtime(layout.request(id)).value ?? 0 }

    /// Done, failed (with the reason) or active. A failure marker that cannot be read now (a
    /// network filesystem's ESTALE, a rename racing us) is looked at again later: the request
    /// counts as active meanwhile. One that was read but does not parse goes to `corrupt/`, and
    /// the request is judged again from what is on disk (settling marks it done when its files
    /// are final), never reported as failed without a reason.
    public func state(of id: String) -> RequestState {
        if let known = lock.withLock({ inPass ? passStates[id] : nil }) { return known }
        let state = lookAtState(of: id)
        lock.withLock { if inPass { passStates[id] = state } }
        return state
    }

    private func lookAtState(of id: String) -> RequestState {
        let failed = layout.failedMarker(id)
        if SharedFS.exists(failed) == true {
            switch readRecord(failed, decode: FailureRecord.decode) {
            case .record(let failure): return .failed(failure)
            case .corrupt(let why):
                quarantine(failed, reason: why, stillCorrupt: { FailureRecord.decode($0) == nil })
            case .unreadable:
                return .active
            }
        }
        return SharedFS.exists(layout.doneMarker(id)) == true ? .done : .active
    }

    public func markDone(_ id: String) {
        publishMarker(layout.doneMarker(id), Data())
        forgetPassState(of: id)
    }

    public func markFailed(_ id: String, _ failure: FailureRecord) {
        publishMarker(layout.failedMarker(id), failure.json)
        forgetPassState(of: id)
    }

    func forgetPassState(of id: String) { lock.withLock { _ = passStates.removeValue(forKey: id) } }

    /// Publishes a small marker file once (the first writer wins; later ones are no-ops), then
    /// wakes the local waiters that sleep on the wake word instead of inotify — also when someone
    /// published first (a publisher killed before its bump must not leave them to their pass).
    /// The word is mapped before the marker appears: the inotify waiters the marker wakes (up to
    /// 128) take the CPU, and the word's sleepers must not wait behind them for this process to
    /// open and map a file.
    func publishMarker(_ target: String, _ data: Data) {
        let temp = tempPath("marker")
        do {
            try SpoolFS.writeNew(temp, data)
        } catch SpoolError.io(_, _, let code) where DiskSpace.isFull(code) && !data.isEmpty {
            // No room for the record's bytes (the spool shares a full disk): an empty marker needs
            // no block, and an empty failure record reads as a full disk (FailureRecord.decode).
            // Unpublished, the failure would go unseen and the request wait for ever.
            guard (try? SpoolFS.writeNew(temp, Data())) != nil else { return }
        } catch {
            return
        }
        let word = wakeWord(for: .waiters)
        _ = try? SpoolFS.publishOnce(temp, as: target)
        bumpGeneration()
        word?.wakeEveryone()
    }

    /// The wake word of this spool that `listener` sleeps on (docs/protocol.md), nil when it
    /// cannot be mapped.
    public func wakeWord(for listener: WakeWord.Listener) -> WakeWord? { WakeWord(spoolRoot: layout.root, listener: listener) }

    /// A file's unrecoverable failure (404, gated, checksum), recorded by whoever met it.
    public func recordFailure(_ key: String, _ failure: FailureRecord) {
        publishMarker(layout.failure(key), failure.json)
    }

    /// The recorded failure of a file; a corrupt record goes to `corrupt/` (the file is tried
    /// again, and a new failure can be recorded in its place).
    public func failure(of key: String) -> FailureRecord? { record(layout.failure(key), decode: FailureRecord.decode) }

    /// Removes a file's recorded failure; true when there was one.
    @discardableResult
    public func clearFailure(_ key: String) -> Bool { unlink(layout.failure(key)) == 0 }
    /// True when `failures/` was listed and holds nothing (no file of any request failed).
    public func hasNoFailures() -> Bool { SharedFS.names(layout.path(.failures))?.isEmpty == true }

    /// Where the settling of a request resumes: its files before this index were final at the
    /// last look (this process's memory, not the spool's).
    public func settleResume(_ id: String) -> Int { lock.withLock { settleResumes[id] ?? 0 } }

    /// Remembers where the settling of a request resumes; nil forgets it.
    public func noteSettleResume(_ id: String, _ index: Int?) {
        lock.withLock {
            if index != nil && settleResumes.count >= 4096 { settleResumes.removeAll() }
            settleResumes[id] = index
        }
    }
}
