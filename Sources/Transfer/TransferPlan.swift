// TransferPlan - the first step of a run: take each file's staging lock, open (or resume) its
// staging file (its descriptor closed until used), locate the files that go as ranges, and queue the ranges still missing.
import Foundation
import HubTypes
import ModelCache
import SharedFiles

extension TransferRun {
    func plan(_ files: [RepoFile]) throws {
        // A size the disk cannot hold is refused before any file is staged (a staging file is
        // sparse, so nothing else would notice until the disk is full).
        try DiskSpace.checkRoom(for: files, in: directory)
        var large: [FileTask] = []
        for file in files {
            if file.size == 0 {
                try directory.placeEmptyFile(file)
                meter.fileDone(nil)
                continue
            }
            guard let lock = try StagingLock.take(file.path, in: directory, owner: owner, lease: settings.lease) else {
                heldElsewhere.append(file)
                continue
            }
            locks.add(lock)
            let ranged = file.size >= settings.rangeThreshold
            let staging = try StagingFile(file: file, in: directory, commit: commit,
                                          rangeSize: ranged ? settings.rangeSize : file.size)
            // Every file of the selection is staged here, thousands of them at once: a file's
            // descriptor is open only while its ranges are in flight or a hash, sync or
            // finalization uses it, so `ulimit -n` bounds the connections, not the selection.
            staging.closeDescriptorWhenIdle()
            let task = FileTask(file: file, staging: staging, ranged: ranged,
                                url: engine.client.resolveURL(repo, commit: commit, path: file.path))
            tasks.append(task)
            meter.add(bytes: task.countedBytes)
            if ranged { large.append(task) }
        }
        try locate(large)
        for task in tasks where !task.finalizing {
            if task.pending == 0 {
                durability.startFinalize(task)
                continue
            }
            let done = task.staging.doneRanges
            for i in 0..<task.staging.rangeCount where !done.contains(i) {
                let r = task.staging.range(i)
                // The durable head an earlier run recorded (it stopped early): ask for the rest.
                let head = task.ranged ? task.staging.partialBytes(i) : 0
                if head > 0 {
                    task.countedBytes += head
                    meter.add(bytes: head)
                }
                ready.append(RangeJob(task: task, index: i, start: r.start + head, end: r.end))
            }
        }
    }

    /// Asks the Hub where each large file's bytes are (the CDN redirect), a few at a time.
    private func locate(_ large: [FileTask]) throws {
        guard !large.isEmpty else { return }
        let results = LockedArray<Result<String, Error>?>(count: large.count, initial: nil)
        DispatchQueue.concurrentPerform(iterations: large.count) { i in
            results[i] = Result { try locator.source(of: large[i].file, repo: repo, commit: commit) }
        }
        for (i, task) in large.enumerated() {
            switch results[i]! {
            case .success(let url): task.url = url
            case .failure(let error): failFile(task, error)  // the other files go on
            }
        }
    }
}
