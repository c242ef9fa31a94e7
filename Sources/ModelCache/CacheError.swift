// CacheError - failures of the on-disk cache: misses, bad files, checksum mismatches.
import ByteUnits
import Foundation
import SharedFiles

public enum CacheError: Error, Sendable, CustomStringConvertible {
    /// Offline (or Hub unreachable) and these files are not complete in `directory`.
    case cacheMiss(repo: String, directory: String, missing: MissingFiles, reason: String)
    case checksumMismatch(path: String, expected: String, actual: String)
    /// A file git stores itself (not LFS) whose bytes do not hash to the blob id the tree listed.
    case blobMismatch(path: String, expected: String, actual: String)
    case sizeMismatch(path: String, expected: Int64, actual: Int64)
    /// A file of several ranges did not verify and is kept for repair: `ranges` are to be
    /// fetched again and compared with the staged bytes (StagingRepair.swift). Not a failure.
    case repairing(path: String, ranges: [Int])
    case badShardIndex(path: String, reason: String)
    case io(path: String, operation: String, errno: Int32)
    case notInRepo(repo: String, paths: [String])
    /// A cache directory the caller named cannot hold a cache: `role` says which setting named it.
    case unusableDirectory(path: String, role: String, reason: String)
    /// The disk is full (ENOSPC, EDQUOT): what is staged was kept for the resume.
    case diskFull(directory: String, needed: Int64, available: Int64, staged: String)
    /// A listed file is larger than the free space where it would be staged: refused before
    /// anything was written.
    case tooLargeForDisk(path: String, size: Int64, available: Int64, directory: String)
    /// Another process held a lock longer than the wait's bound.
    case lockWaitExpired(path: String, seconds: Double, holder: String)
    /// A cache entry that must be a plain directory (or pointer) is something else, e.g. a
    /// symbolic link planted to lead writes out of the cache.
    case unsafeCacheEntry(path: String, reason: String)

    public var description: String {
        switch self {
        case .cacheMiss(let repo, let directory, let missing, let reason):
            return "\(reason): \(repo) is not complete in \(directory); \(missing.listed)"
        case .checksumMismatch(let path, let expected, let actual):
            return "checksum mismatch for \(path): expected sha256 \(expected), got \(actual); the corrupt file was deleted, run the download again"
        case .blobMismatch(let path, let expected, let actual):
            return "checksum mismatch for \(path): expected git blob id \(expected), got \(actual); the corrupt file was deleted, run the download again"
        case .sizeMismatch(let path, let expected, let actual):
            return "size mismatch for \(path): expected \(expected) bytes, got \(actual); the file was deleted, run the download again"
        case .repairing(let path, let ranges):
            return "\(path) did not verify; fetching range\(ranges.count == 1 ? "" : "s") \(ranges.map(String.init).joined(separator: ", ")) again to find the bad bytes"
        case .badShardIndex(let path, let reason):
            return "shard index \(path) is unusable: \(reason)"
        case .io(let path, let operation, let code):
            return "cannot \(operation) \(path): \(String(cString: strerror(code)))"
        case .unusableDirectory(let path, let role, let reason):
            return "cannot use \(path.isEmpty ? "an empty path" : "'\(path)'") as \(role): \(reason)"
        case .diskFull(let directory, let needed, let available, let staged):
            return "the disk holding \(directory) is full: \(ByteFormat.withExactBytes(needed)) more are needed to finish, "
                + "\(ByteFormat.withExactBytes(available)) are free; \(staged) was kept in \(directory)/.incomplete, "
                + "so free space (or use another --cache-dir/--cache-base) and run the download again to resume"
        case .tooLargeForDisk(let path, let size, let available, let directory):
            return "\(path) is \(ByteFormat.withExactBytes(size)) but only \(ByteFormat.withExactBytes(available)) are free on the disk holding "
                + "\(directory); nothing was written: free space, or use another --cache-dir/--cache-base (a listing that "
                + "claims such a size from a mirror may also be wrong: check HF_ENDPOINT)"
        case .lockWaitExpired(let path, let seconds, let holder):
            return "gave up after \(Int(seconds.rounded())) s waiting for the lock \(path), held by \(holder); "
                + "try again once it finished (SPEECH_FETCH_LOCK_WAIT_SECONDS sets the wait)"
        case .unsafeCacheEntry(let path, let reason):
            return "refusing to use \(path): \(reason); nothing was written through it. Remove it (or move the cache) and try again"
        case .notInRepo(let repo, let paths):
            return "\(repo) has no file \(paths.joined(separator: ", ")); check the --include names"
        }
    }

}

extension CacheError {
    /// An I/O error that says nothing about the file (ESTALE, EIO, …): try again later; never a
    /// reason to discard the file or fail its request.
    public var isTransient: Bool {
        if case .io(_, _, let code) = self { return SharedFS.isTransient(code) }
        return false
    }
}

extension CacheError {
    /// Runs a call of the filesystem layer, saying its failure as `CacheError.io`.
    static func saying<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as FileError {
            throw CacheError.io(path: error.path, operation: error.operation, errno: error.errno)
        }
    }
}
