// SettledLook - wakes a waiter blocked on inotify soon after another node settles its request.
//
// Where inotify cannot see other nodes' writes (NFS, FUSE), a waiter sleeping in its watcher
// sees a done/ or failed/ marker another node published only at its next poll. One thread looks
// at the spool's generation every quarter poll interval (an fstat of a descriptor it holds, which
// the client's attribute cache mostly answers; every marker's publisher bumps it) and, when it moved, at the request's
// two markers; once one is there, it touches it: a local change in a watched folder, which wakes
// the waiter at once. The marker's mtime moves by less than the poll interval; nothing judges
// it by age sooner.
import Foundation
import Spool

final class SettledLook: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false

    init(spool: Spool, id: String, every seconds: Double) {
        Thread { [self] in
            var seen: SpoolGeneration? = nil
            while !isStopped {
                Thread.sleep(forTimeInterval: seconds)
                if isStopped { return }
                let generation = spool.heldGenerationLook()  // an fstat of a held descriptor
                if generation != nil && generation == seen { continue }
                seen = generation
                if spool.touchSettledMarker(of: id) { return }
            }
        }.start()
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    func stop() { lock.withLock { stopped = true } }
}
