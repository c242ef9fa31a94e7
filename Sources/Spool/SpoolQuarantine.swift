// SpoolQuarantine - a spool record read whole that does not parse, moved to `corrupt/` with a
// line in the daemon's log, kept apart from one that merely could not be read now
// (docs/protocol.md, "Corrupt records").
import Foundation
import SharedFiles

extension Spool {
    /// What reading one spool record found. "Unreadable" (absent, or a read that failed: on a
    /// network filesystem ESTALE or EIO mean "look again") is kept apart from "corrupt" (read
    /// whole, and it does not parse): only the second is ever moved to `corrupt/`.
    enum RecordRead<T> {
        case record(T)
        case unreadable
        case corrupt(String)
    }

    func readRecord<T>(_ path: String, decode: (Data) -> T?) -> RecordRead<T> {
        guard let data = SharedFS.read(path).value else { return .unreadable }
        if let value = decode(data) { return .record(value) }
        return .corrupt(data.isEmpty ? "empty" : "\(data.count) bytes that do not parse")
    }

    /// The record at `path`, or nil; a corrupt one is moved to `corrupt/` on the way.
    func record<T>(_ path: String, decode: @escaping (Data) -> T?) -> T? {
        switch readRecord(path, decode: decode) {
        case .record(let value): return value
        case .unreadable: return nil
        case .corrupt(let why):
            quarantine(path, reason: why, stillCorrupt: { decode($0) == nil })
            return nil
        }
    }

    /// Moves an unreadable record to `corrupt/<folder>.<name>.<node>.<pid>.<n>` and says so on
    /// stderr (the daemon's log). Whoever renames first wins; a record that a writer replaced
    /// with a good one between our read and the rename is put back (`stillCorrupt` judges what
    /// was moved). Returns the new path.
    @discardableResult
    public func quarantine(_ path: String, reason: String, stillCorrupt: (Data) -> Bool = { _ in true }) -> String? {
        let target = layout.corrupt(path, owner: owner, n: nextCount())
        try? SpoolError.saying { try FileIO.makeDirectory(layout.path(.corrupt), mode: 0o700) }
        guard rename(path, target) == 0 else { return nil }  // gone already: someone else moved it
        if let moved = SharedFS.read(target).value, !stillCorrupt(moved) {
            link(target, path)  // EEXIST: a newer record is there already, and it wins
            unlink(target)
            return nil
        }
        SharedFS.touch(target)  // its age in corrupt/ counts from now (`speech cache clean`)
        bumpGeneration()  // a record set aside is work for a supervisor (a file to plan again)
        Spool.report("speech-fetch: spool: moved the unreadable record \(path) (\(reason)) to \(target)")
        return target
    }

    /// Records moved to `corrupt/`, oldest first.
    public func corruptRecords() -> [String] {
        (SharedFS.names(layout.path(.corrupt)) ?? []).sorted {
            (SharedFS.mtime(layout.path(.corrupt, $0)).value ?? 0) < (SharedFS.mtime(layout.path(.corrupt, $1)).value ?? 0)
        }
    }

    static func report(_ line: String) {
        StandardError.write(line + "\n")  // a line stderr cannot take is dropped, never a crash
    }
}
