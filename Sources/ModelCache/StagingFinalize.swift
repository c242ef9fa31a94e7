// StagingFinalize - a staged file checked (size, then SHA-256 or the git blob id) and renamed
// into place, or handed to its repair; a staging file discarded.
import Digest
import Foundation
import SharedFiles

extension StagingFile {
    /// Checks size and content (SHA-256 for LFS files, the git blob id for the rest), then renames
    /// the file into place. A file of several ranges that does not verify is kept and repaired:
    /// `CacheError.repairing` names the ranges to fetch again (StagingRepair.swift); a file that
    /// cannot be repaired (one range, or every range fetched again) is deleted with its sidecar
    /// and the error says so: a corrupt file is never cached.
    public func finalize() throws {
        try descriptor.borrow { try finalize(using: $0) }
    }

    private func finalize(using fd: Int32) throws {
        var st = stat()
        // An unreadable size is not a wrong size: nothing is discarded on a stale handle.
        guard SharedFS.retry({ fstat(fd, &st) }) == 0 else {
            throw CacheError.io(path: dataURL.path, operation: "read the size of the staging file", errno: errno)
        }
        if Int64(st.st_size) != file.size {
            discard()
            throw CacheError.sizeMismatch(path: file.path, expected: file.size, actual: Int64(st.st_size))
        }
        if let repair = lock.withLock({ record.repair }), !repair.unverified {
            // Under repair and no byte changed since the digest last failed: look further.
            try continueRepair(digest: repair.digest)
        }
        if let expected = file.sha256 {
            let actual = try wholeFileDigest()
            if actual != expected { try continueRepair(digest: actual) }
        } else {
            // A file git stores itself (config, tokenizer): its blob id is the check. These are
            // small on the Hub, so they are hashed here in one pass from the page cache.
            // Ranges written in place by other processes are read through a descriptor opened now.
            let actual = try readsAfresh
                ? readingAfresh { try SHA1.gitBlobID(fileDescriptor: $0, path: dataURL.path, size: file.size) }
                : SHA1.gitBlobID(fileDescriptor: fd, path: dataURL.path, size: file.size)
            if actual != file.blobID.lowercased() { try continueRepair(digest: actual) }
        }
        ModelDirectory.recordContentID(file, fd: fd)
        guard fsync(fd) == 0 else { throw CacheError.io(path: dataURL.path, operation: "sync", errno: errno) }
        switch SharedFS.lstat(dataURL.path) {
        case .found(let onDisk) where UInt64(onDisk.st_ino) == inode:
            break
        case .found, .absent:
            throw CacheError.io(path: dataURL.path, operation: "finalize (it was replaced or deleted meanwhile) the staging file", errno: ESTALE)
        case .unknown(let code):
            throw CacheError.io(path: dataURL.path, operation: "look up (before the rename into place) the staging file", errno: code)
        }
        if directory.hubCommit != nil {
            // huggingface_hub gives a blob the mode a new file in the cache gets (0666 less the umask).
            fchmod(fd, 0o666 & ~StagingFile.umaskValue)
            try directory.installBlob(from: dataURL.path, file: file)
        } else {
            // Through descriptors of the repo path's folders: a folder that is a link is not followed.
            try directory.renameIntoPlace(from: dataURL.path, repoPath: file.path)
        }
        unlink(sidecarURL.path)
        StagingFile.removeStagingIfEmpty(directory)
    }

    /// This process's umask, read from /proc (calling umask(2) to read it would race other threads).
    static let umaskValue: mode_t = {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
              let value = mode_t(line.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) else { return 0o022 }
        return value
    }()

    /// Deletes the staged bytes and the sidecar.
    public func discard() {
        unlink(dataURL.path)
        unlink(sidecarURL.path)
        StagingFile.removeStagingIfEmpty(directory)
    }

    public static func removeStagingIfEmpty(_ directory: ModelDirectory) {
        rmdir(directory.stagingDirectory.path)  // fails harmlessly while anything is left
    }
}
