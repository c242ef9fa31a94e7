// RoomCheck - a download's room on disk: a file larger than the free space refused before any
// byte is written, and a full disk said with what is still needed.
import Foundation
import HubTypes
import SharedFiles

extension DiskSpace {
    /// True when `error` is a cache write that failed because the disk is full.
    public static func isFull(_ error: Error) -> Bool {
        if case CacheError.io(_, _, let code) = error { return isFull(code) }
        return false
    }

    /// Refuses, before anything is written, a file whose bytes still to stage are more than the
    /// space free where it is staged: `CacheError.tooLargeForDisk` naming the file, its size, the
    /// free bytes and the directory. A file already partly staged counts only what it lacks.
    public static func checkRoom(for files: [RepoFile], in directory: ModelDirectory) throws {
        guard let largest = files.max(by: { $0.size < $1.size }), largest.size > 0 else { return }
        let probe = nearestExisting(directory.stagingDirectory.path)
        let free = available(at: probe)
        for file in files where file.size > free {
            var st = stat()
            let staged = stat(directory.stagingPath(ModelLayout.stagingName(file.path)), &st) == 0 ? Int64(st.st_blocks) * 512 : 0
            if file.size - staged > free {
                throw CacheError.tooLargeForDisk(path: file.path, size: file.size, available: free, directory: directory.path)
            }
        }
    }

    /// `error` as `CacheError.diskFull` when it is a full disk (with what is still needed and
    /// what is free), else unchanged.
    public static func explain(_ error: Error, directory: ModelDirectory, needed: Int64, staged: [String]) -> Error {
        guard isFull(error) else { return error }
        let what = staged.isEmpty ? "nothing" : staged.count == 1 ? staged[0] : "\(staged.count) files (\(staged.prefix(3).joined(separator: ", "))\(staged.count > 3 ? ", …" : ""))"
        return CacheError.diskFull(directory: directory.path, needed: needed,
                                   available: available(at: directory.path), staged: what)
    }
}
