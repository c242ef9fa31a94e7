// SpoolParts - a range's part: written in `tmp/`, adopted from a gone writer (partial-range
// resume), published once by link(2), and listed for the splicer.
import Foundation
import SharedFiles

extension Spool {
    /// Where a worker writes a part before publishing it.
    public func partTempPath(_ claim: ClaimedJob) -> String { tempPath(SpoolLayout.partTempHint(claim.name)) }

    /// Takes over the part file a gone claimant of `claim`'s job left in `tmp/` (partial-range
    /// resume): the longest such part is renamed to `temp` and the others are removed. Gone
    /// means a dead (or zombie) pid on this node whose part was written since this boot (after a power loss
    /// unsynced bytes may be garbage, so it is dropped), or another node's part untouched for a
    /// lease. Returns the bytes the part holds: the range's first bytes, written in order (0:
    /// nothing to adopt). The final digest check stays the last word on them.
    ///
    /// `stagingTag`: the claimant writes the range in place into the staging file of that tag; it
    /// adopts only a progress record of the same tag written on this node (its bytes are in this
    /// machine's page cache, which a killed process leaves). Another node's record is never
    /// adopted: its bytes were not synced when its length was set (the range is fetched whole).
    /// A claimant writing a part adopts only a part.
    public func adoptPart(_ claim: ClaimedJob, as temp: String, rangeLength: Int64, stagingTag: String? = nil) -> Int64 {
        guard let best = goneParts(of: claim.name, rangeLength: rangeLength, except: (temp as NSString).lastPathComponent,
                                   stagingTag: stagingTag),
              best.size > 0, rename(best.path, temp) == 0 else { return 0 }
        return best.size
    }

    /// The longest unfinished part of `job` in `tmp/` whose writer is gone (as `adoptPart`
    /// judges), if any; the other such parts, and those not to be trusted, are removed. Only parts
    /// of the kind `stagingTag` says are looked at: with none, parts holding their bytes; with
    /// one, this node's progress records of ranges written into the staging file of that tag.
    public func goneParts(of job: String, rangeLength: Int64, except mine: String = "",
                          stagingTag: String? = nil) -> (path: String, size: Int64)? {
        let round = leaseRound()
        var best: (path: String, size: Int64)?
        for name in SharedFS.names(layout.path(.tmp)) ?? [] where name != mine {
            guard let temp = SpoolLayout.Temp(name), temp.partJob == job, temp.stagingTag == stagingTag,
                  stagingTag == nil || temp.node == owner.node else { continue }
            let pid = temp.pid
            let path = layout.path(.tmp, name)
            var st = stat()
            guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            let mtime = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
            // A live writer is never adopted from; an unknown one neither (the clock unread).
            if temp.node == owner.node {
                guard round.liveness(of: path, holder: LockOwner(node: temp.node, pid: pid), localByPid: true) == .expired
                else { continue }
                if mtime < BootIdentity.startTime { unlink(path); continue }
            } else {
                guard round.age(.found(mtime)) == .expired else { continue }
            }
            let size = Int64(st.st_size)
            if size > rangeLength { unlink(path); continue }  // not this range's bytes
            if let kept = best {
                if size <= kept.size { unlink(path); continue }
                unlink(kept.path)
            }
            best = (path, size)
        }
        return best
    }

    /// Publishes a finished, synced part and drops the claim. The first part of a range wins
    /// (link(2)): false when one was there already (an endgame duplicate, or the claimant it
    /// raced, published first), and this one is discarded. A winning duplicate also removes the
    /// claim it raced, so the slower claimant gives the range up at its next refresh.
    @discardableResult
    public func publishPart(_ temp: String, for claim: ClaimedJob) throws -> Bool {
        let won = try SpoolFS.publishOnce(temp, as: layout.part(claim.name))
        unlink(claim.path)
        if won, let raced = claim.duplicateOf { unlink(raced) }
        return won
    }

    /// Is the range's part published? nil when that cannot be read.
    public func hasPart(_ file: PlannedFile, _ index: Int) -> Bool? {
        SharedFS.exists(layout.part(file.jobName(index)))
    }

    /// Completed parts waiting to be spliced, by file key.
    public func partsByFile() -> [String: [Int]] {
        var result: [String: [Int]] = [:]
        for job in (SharedFS.names(layout.path(.parts)) ?? []).compactMap(SpoolLayout.partJob) {
            if let (key, index) = PlannedFile.parseJob(job) { result[key, default: []].append(index) }
        }
        return result
    }

    /// True when parts wait that nobody is about to splice: no supervisor serves the spool, or
    /// a part has waited longer than `seconds` (on the filesystem's clock).
    /// `supervised`: whether a supervisor is alive, when the caller has just looked.
    public func hasOrphanParts(olderThan seconds: Double, supervised: Bool? = nil) -> Bool {
        let parts = (SharedFS.names(layout.path(.parts)) ?? []).compactMap(SpoolLayout.partJob)
        guard !parts.isEmpty else { return false }
        if !(supervised ?? anySupervisorServes()) { return true }
        guard let now = serverNow() else { return false }
        return parts.contains { now - (SharedFS.mtime(layout.part($0)).value ?? now) > seconds }
    }

    /// The published part of a range (what the splicer copies from).
    public func partPath(_ file: PlannedFile, _ index: Int) -> String { layout.part(file.jobName(index)) }

    /// Removes the published parts of a file whose plan is gone (final or failed).
    public func dropParts(key: String, indices: [Int]) {
        for index in indices { unlink(layout.part(PlannedFile.jobName(key: key, index: index))) }
    }
}
