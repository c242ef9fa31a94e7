// XetTransfer - the embedded engine's native Xet path: a Xet-backed file (the tree's `xetHash`)
// is fetched as its reconstruction's xorb ranges instead of through the Hub's bridge, into the
// same staging file, lock and finalization as any file (docs/xet.md).
//
// Every chunk is decoded and hashed where it arrives (XetRangeFetch); the file's Merkle root,
// assembled from those hashes, must be its Xet hash, and finalization still checks the SHA-256
// of the bytes on disk. A file that fails either check is fetched once more from scratch, then
// fails naming itself, and nothing is put in place. Finished terms are recorded in the sidecar,
// so a killed call's successor fetches only the rest.
import Curl
import Foundation
import HubClient
import HubTypes
import ModelCache
import SharedFiles
import Xet

extension TransferRun {
    /// Fetches the Xet-backed `files` one after another, each over up to `concurrency`
    /// connections. A file that fails joins `failedFiles` (the others go on); a file whose staging
    /// file holds progress of a plain fetch is returned, to be finished plainly.
    func fetchXet(_ files: [RepoFile]) throws -> [RepoFile] {
        guard !files.isEmpty else { return [] }
        try DiskSpace.checkRoom(for: files, in: directory)
        let cas = XetCAS(client: engine.client, repo: repo, commit: commit)
        var plain: [RepoFile] = []
        for file in files {
            if isCancelled() { throw CancellationError() }
            guard let hash = file.xetHash else { plain.append(file); continue }
            guard let lock = try StagingLock.take(file.path, in: directory, owner: owner, lease: settings.lease) else {
                heldElsewhere.append(file)
                continue
            }
            let staging: StagingFile
            do {
                staging = try StagingFile(file: file, in: directory, commit: commit, rangeSize: file.size)
            } catch {
                lock.release()
                throw error
            }
            if staging.rangeCount > 1 {
                // An earlier plain fetch's ranges are on disk: it is finished the way it began.
                lock.release()
                plain.append(file)
                continue
            }
            locks.add(lock)
            meter.currentFile = file.path
            do {
                try fetchXetFile(file, hash: hash, staging: staging, cas: cas)
                meter.fileDone(file.path)
                meter.report(force: true, completed: file.path)
            } catch let error as XetDownloadError {
                failedFiles.append(error)
            } catch let error as HubError {
                try? staging.persist()
                failedFiles.append(error)
            }
        }
        return plain
    }

    /// One file: fetched, checked, renamed into place; fetched once more from scratch (a new
    /// staging file, no record) when the bytes do not make the file.
    private func fetchXetFile(_ file: RepoFile, hash: String, staging first: StagingFile, cas: XetCAS) throws {
        var staging = first
        for round in 0..<2 {
            if round == 1 {
                staging.discard()
                staging = try StagingFile(file: file, in: directory, commit: commit, rangeSize: file.size)
            }
            let counted = meter.completedBytes
            staging.holdDescriptor()
            defer { staging.releaseDescriptor() }
            do {
                try fetchXetOnce(file, hash: hash, staging: staging, cas: cas, fromStore: round == 0)
                return
            } catch let bad as XetBadBytes {
                meter.add(bytes: counted - meter.completedBytes)
                guard round == 0 else {
                    staging.discard()
                    throw XetDownloadError.verificationFailed(path: file.path, what: bad.what)
                }
                RetryEvents.report(RetryEvent(subject: file.path, error: HubError.badResponse(url: "the Xet CAS", reason: "\(bad.what); fetching it again from scratch"),
                                              attempt: 2, attempts: 2, wait: 0))
            }
        }
    }

    /// One fetch of the file from its reconstruction, resuming from the terms the record names;
    /// `fromStore`: terms whose chunks the cache holds are read from there (not when fetching
    /// again after a failure: then every byte comes from the CAS).
    private func fetchXetOnce(_ file: RepoFile, hash: String, staging: StagingFile, cas: XetCAS, fromStore: Bool) throws {
        let plan = try XetFilePlan.fetch(file, hash: hash, cas: cas, pageSize: settings.xetPageSize, isCancelled: isCancelled)
        var done: [String: XetDoneTerm] = [:]
        for term in staging.xetTerms(for: hash) where XetFileFetch.leaves(of: term) != nil {
            done[XetFilePlan.key(term)] = term
        }
        // Terms whose chunks a final file of the cache holds are copied from there, each chunk
        // checked against its recorded hash (XetStoreFill); only the rest is fetched.
        if fromStore, let index = engine.xetChunkIndex {
            var store = XetStoreFill(index: index)
            for term in store.fill(plan, skipping: done, into: staging) {
                staging.recordXetTerm(term)
                done[XetFilePlan.key(term)] = term
            }
        }
        var started: [String: XetDoneTerm] = [:]
        for head in staging.xetHeads(for: hash) { started[XetFilePlan.headKey(head)] = head }
        let tasks = plan.tasks(skipping: done, started: started)
        let fetch = XetFileFetch(file: file, staging: staging, plan: plan, cas: cas, hash: hash, done: done,
                                 started: started, tasks: tasks)
        var counted = fetch.writtenBytes
        meter.add(bytes: counted)
        try runRanges(of: fetch, connections: min(settings.concurrency, tasks.count)) {
            let now = fetch.writtenBytes
            self.meter.add(bytes: now - counted)
            counted = now
        }
        // Every term is written: the chunks' Merkle root must be the file's Xet hash.
        guard let leaves = fetch.allLeaves else {
            throw XetBadBytes(what: "some of its terms were never written")
        }
        let actual = MerkleTree.fileHash(of: leaves).hex
        guard actual == hash else {
            throw XetBadBytes(what: "its chunks make Xet hash \(actual), the Hub names \(hash)")
        }
        try staging.persist()
        do {
            try staging.finalize()
        } catch CacheError.repairing {
            throw XetBadBytes(what: "its bytes on disk do not have the SHA-256 the Hub names (\(file.sha256 ?? ""))")
        } catch let error as CacheError {
            if case .checksumMismatch = error { throw XetBadBytes(what: "\(error)") }
            throw error
        }
        // Verified and in place: its chunks may now serve other files (a huggingface_hub
        // cache's final path is a link to a blob: not indexed).
        if let index = engine.xetChunkIndex, directory.hubCommit == nil, let terms = fetch.termRecords {
            index.publish(path: indexedDirectory.finalURL(file.path).path, size: file.size, fileHash: hash, terms: terms)
        }
    }

    /// Runs the fetch's range tasks on `connections` threads (one handle each) while this
    /// thread reports progress (`tick`) and records finished terms in the sidecar.
    private func runRanges(of fetch: XetFileFetch, connections: Int, tick: () -> Void) throws {
        let group = DispatchGroup()
        let runner = XetRangeFetch(settings: settings, cap: engine.cap, isCancelled: isCancelled)
        for _ in 0..<max(0, connections) {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                let easy = CurlEasy()
                while let task = fetch.nextTask() {
                    do {
                        try runner.run(task, of: fetch, on: easy)
                    } catch {
                        fetch.fail(error)
                    }
                }
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        var lastPersist = MonotonicClock.seconds()
        while group.wait(timeout: .now() + 0.1) == .timedOut {
            tick()
            meter.report(force: false)
            if locks.anyLost {
                fetch.fail(CacheError.io(path: directory.stagingDirectory.path,
                                         operation: "keep writing (another process broke a staging lock of this download in)",
                                         errno: ESTALE))
            }
            if MonotonicClock.seconds() - lastPersist >= TransferRun.xetRecordInterval {
                fetch.staging.recordXetHeads(fetch.headRecords)
                try? fetch.staging.persist()
                lastPersist = MonotonicClock.seconds()
            }
        }
        tick()
        // What was written is recorded whatever happens next: a resume starts after it.
        fetch.staging.recordXetHeads(fetch.headRecords)
        try? fetch.staging.persist()
        if let failure = fetch.firstFailure {
            if isCancelled() { throw CancellationError() }
            throw failure
        }
        if isCancelled() { throw CancellationError() }
    }

    /// How often the finished terms of a Xet file are recorded while it is fetched.
    static let xetRecordInterval: Double = 0.25
}
