// TransferLoop - the embedded engine's event loop: start ranges under the concurrency limit,
// let each attempt's `RangeWriter` put its bytes on disk, and act on what
// `RangeAttemptPolicy` makes of its end.
import Curl
import Foundation
import HubClient
import ModelCache
import SharedFiles

extension TransferRun {
    func loop() throws {
        while true {
            if let fatal { throw fatal }
            // Finished files are collected before a cancel is looked at: a Ctrl-C that lands
            // once the last file is final ends a finished run, not an interrupted one.
            collectFinalized()
            if let fatal { throw fatal }
            if ready.isEmpty && active.isEmpty && tasks.allSatisfy({ $0.finalizing })
                && durability.finalizedCount == tasks.count { return }
            if isCancelled() { throw CancellationError() }
            startJobs()
            for (easy, result) in multi.poll(timeoutMs: active.isEmpty ? 20 : 100) {
                guard let entry = active.removeValue(forKey: ObjectIdentifier(easy)) else { continue }
                entry.job.task.staging.releaseDescriptor()
                idleHandles.append(easy)
                // Stopped by the cancel (above): not a failure to judge; the loop ends next.
                if isCancelled() && !entry.job.writer.isComplete {
                    ready.append(entry.job)
                    continue
                }
                handle(entry.job, result)
            }
            tick()
            if locks.anyLost {
                throw CacheError.io(path: directory.stagingDirectory.path,
                                    operation: "keep writing (another process broke a staging lock of this download in)",
                                    errno: ESTALE)
            }
        }
    }

    /// The bookkeeping that follows arriving bytes: run between the loop's polls, and from the
    /// write path at most every `tickInterval`, since under a cap one poll can last seconds
    /// (libcurl keeps reading a socket that has data waiting, up to 100 reads a handle, and each
    /// capped read waits its turn). Progress and `speech status` must move as bytes arrive.
    func tick() {
        lastTick = MonotonicClock.seconds()
        // Ranges in flight are noted as they grow (per file, every `partialNoteInterval` or
        // `partialNoteBytes`), so a killed process's successor asks only for the rest.
        notePartialRangesWhenDue()
        // Done ranges become durable promptly (and the heads of those in flight are recorded):
        // one sidecar write at a time per file, so a kill loses at most the last interval's bytes.
        for task in tasks where task.dirty { durability.scheduleSync(task) }
        meter.report(force: false)
    }

    /// `tick` from the write path, when the last one is `tickInterval` old.
    private func tickIfDue() {
        if MonotonicClock.seconds() - lastTick >= TransferRun.tickInterval { tick() }
    }

    /// Notes how far each unfinished range has come in its file's record; the file's next
    /// sidecar write records it (`persist(unsyncedHeads:)`). `only`: just these files.
    func notePartialRanges(only due: Set<ObjectIdentifier>? = nil) {
        for job in active.values.map(\.job) + ready where !job.task.finalizing && job.writer.written != job.noted {
            if let due, !due.contains(ObjectIdentifier(job.task)) { continue }
            recordHead(job)
            job.noted = job.writer.written
            job.task.dirty = true
        }
    }

    /// Notes the ranges of every file that got `partialNoteBytes` since its last note, or any
    /// bytes and `partialNoteInterval` has passed.
    private func notePartialRangesWhenDue() {
        let now = MonotonicClock.seconds()
        var due = Set<ObjectIdentifier>()
        for task in tasks where !task.finalizing && task.countedBytes != task.notedBytes {
            if task.countedBytes - task.notedBytes >= TransferRun.partialNoteBytes
                || now - task.notedAt >= TransferRun.partialNoteInterval {
                due.insert(ObjectIdentifier(task))
                task.notedBytes = task.countedBytes
                task.notedAt = now
            }
        }
        if !due.isEmpty { notePartialRanges(only: due) }
    }

    private func collectFinalized() {
        for (task, error) in durability.takeFinalized() {
            if case CacheError.repairing? = error {
                // It did not verify: its bytes stay, and the ranges the repair took out of `done`
                // (nothing of this file is in flight here) are fetched again and compared.
                task.finalizing = false
                let done = task.staging.doneRanges
                fetchAgain(task, (0..<task.staging.rangeCount).filter { !done.contains($0) })
                continue
            }
            if let error {
                // A file that did not verify was deleted; the others go on.
                failedFiles.append(error)
                continue
            }
            meter.fileDone(task.file.path)
            meter.report(force: true, completed: task.file.path)
        }
    }

    private func startJobs() {
        guard fatal == nil else { return }
        let now = MonotonicClock.seconds()
        var i = 0
        while active.count < settings.concurrency && i < ready.count {
            let job = ready[i]
            if job.notBefore > now || (job.task.probing && job.count.attempts == 0) { i += 1; continue }
            ready.remove(at: i)
            start(job)
        }
    }

    private func start(_ job: RangeJob) {
        let easy = idleHandles.popLast() ?? CurlEasy()
        let writer = job.writer
        writer.beginAttempt()
        job.writtenAtAttempt = writer.written
        // The task, not the job: the job holds this writer, so capturing it would be a cycle
        // that keeps the staging file (and its descriptor) open after the run.
        let task = job.task
        writer.onWritten = { [weak self] bytes in
            guard let self else { return }
            task.probing = false
            task.countedBytes += bytes
            meter.add(bytes: bytes)
            meter.currentFile = task.file.path
            tickIfDue()
        }
        var request = HTTPRequest(url: job.url, headers: engine.client.headers(for: job.url),
                                  connectTimeout: settings.connectTimeout, stallTimeout: settings.stallTimeout)
        let ranged = job.sendsRange
        if ranged { request.range = (writer.next, writer.end) }
        let url = job.url
        let isHubOrigin = engine.client.endpoint.isSameOrigin(url)
        let cap = engine.cap
        let isCancelled = isCancelled
        request.receiveBufferSize = cap?.readSize
        easy.prepare(request, onResponse: { status, headers in
            writer.accept(status: status, headers: headers, url: url, ranged: ranged, isHubOrigin: isHubOrigin)
        }, onBody: { bytes in
            // Once cancelled, the attempt stops at its next chunk (the loop puts it back, and
            // shutDown records how far it got): under a cap one poll could otherwise go on
            // for every capped read of every connection before the loop saw the cancel.
            if isCancelled() { return false }
            // Under a cap the loop waits here until the cap allows this chunk (RateCap).
            cap?.take(bytes.count)
            return writer.write(bytes)
        })
        // The staging file stays open while the range is in flight (released as it leaves `active`).
        task.staging.holdDescriptor()
        active[ObjectIdentifier(easy)] = (job, easy)
        multi.add(easy)
    }

    // MARK: Results

    private func handle(_ job: RangeJob, _ result: CurlResult) {
        let context = RangeContext(repo: repo, commit: commit, path: job.task.file.path, url: job.url)
        switch policy.decide(result, writer: job.writer, count: &job.count, context: context) {
        case .complete:
            complete(job)
        case .retry(let delay, let cause):
            RetryEvents.report(RetryEvent(subject: job.task.file.path, error: cause, attempt: job.count.attempts + 1,
                                          attempts: policy.retry.attempts, wait: delay))
            job.notBefore = MonotonicClock.seconds() + delay
            if job.writer.written == job.writtenAtAttempt { job.task.probing = true }
            ready.append(job)
        case .follow(let target):
            job.url = target
            ready.insert(job, at: 0)
        case .locateAgain:
            do {
                let url = try locator.locate(job.task.file, repo: repo, commit: commit)
                job.task.url = url
                for other in ready where other.task === job.task { other.url = url }
                job.url = url
                ready.insert(job, at: 0)
            } catch {
                failFile(job.task, error)
            }
        case .restartAsOneStream:
            restartAsOneStream(job.task)
        case .fail(let error):
            if case .write = job.writer.refusal {
                // The disk (not this file) failed: keep what reached it, and stop the set.
                recordHead(job)
                fail(error)
            } else {
                failFile(job.task, error)
            }
        }
    }

    private func fail(_ error: Error) {
        if fatal == nil { fatal = error }
    }

    private func complete(_ job: RangeJob) {
        let task = job.task
        task.probing = false
        if let index = job.index, let repair = job.repair {
            task.pending -= 1
            fetchAgain(task, task.staging.markRepaired(index, changed: repair.changed))
        } else if let index = job.index {
            task.staging.markDone(index)
            task.pending -= 1
        } else {
            task.staging.markAllDone()
            task.pending = 0
        }
        task.dirty = true
        if task.pending == 0 {
            durability.startFinalize(task)
        } else if task.file.isLFS {
            task.queue.async { try? task.staging.advanceHash() }
        }
    }

    /// Queues ranges of a file under repair to be fetched again; their bytes leave the progress
    /// count until they are in again.
    private func fetchAgain(_ task: FileTask, _ ranges: [Int]) {
        for index in ranges {
            let r = task.staging.range(index)
            task.countedBytes -= r.end - r.start + 1
            meter.add(bytes: -(r.end - r.start + 1))
            task.pending += 1
            ready.append(RangeJob(task: task, index: index, start: r.start, end: r.end))
        }
        task.dirty = true
    }

    /// The server ignored Range: forget this file's ranges and fetch it as one stream from byte 0.
    private func restartAsOneStream(_ task: FileTask) {
        guard !task.wholeFallback else {
            return failFile(task, HubError.badResponse(url: task.url, reason: "the server ignores Range even for a whole-file request"))
        }
        task.wholeFallback = true
        task.probing = false
        dropTransfers(of: task)
        task.queue.sync { task.staging.resetProgress() }
        meter.add(bytes: -task.countedBytes)
        task.countedBytes = 0
        task.pending = 1
        ready.insert(RangeJob(task: task, index: nil, start: 0, end: task.file.size - 1), at: 0)
    }

    /// Forgets a file's queued ranges and takes its transfers off the loop (their handles go
    /// back to the idle pool): the file failed, or starts over as one stream.
    func dropTransfers(of task: FileTask) {
        ready.removeAll { $0.task === task }
        for (key, entry) in active where entry.job.task === task {
            multi.remove(entry.easy)
            active.removeValue(forKey: key)
            task.staging.releaseDescriptor()
            idleHandles.append(entry.easy)
        }
    }
}
