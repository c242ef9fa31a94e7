// RepoWriter - puts repos on disk under the test Hub's root: given bytes, or synthetic
// ones from a counter-based SplitMix64 stream (word i depends only on the seed and i), so
// a 1 GiB file takes about a second and its bytes are the same on every run.
import Foundation
import SharedFiles

enum RepoWriter {
    static func checkRepoID(_ repo: String) throws {
        let parts = repo.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") }) else {
            throw TestHubError.invalidRepoID(repo)
        }
    }

    static func checkPath(_ path: String, in repo: String) throws {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !path.hasSuffix(RepoCatalog.partialSuffix),
              parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." && $0 != ".git" }) else {
            throw TestHubError.invalidPath(repo: repo, path: path)
        }
    }

    static func write(root: URL, repo: String, files: [String: Data]) throws {
        try checkRepoID(repo)
        for path in files.keys { try checkPath(path, in: repo) }
        for (path, data) in files.sorted(by: { $0.key < $1.key }) {
            try writeAtomically(root: root, repo: repo, path: path) { fd, target in
                try data.withUnsafeBytes { try writeAll(fd, $0, target: target) }
            }
        }
    }

    static func generate(root: URL, repo: String, files: [String: Int], seed: UInt64) throws {
        try checkRepoID(repo)
        for (path, size) in files {
            try checkPath(path, in: repo)
            guard size >= 0 else { throw TestHubError.invalidPath(repo: repo, path: "\(path) (size \(size))") }
        }
        for (path, size) in files.sorted(by: { $0.key < $1.key }) {
            let stream = SplitMixStream(seed: fnv1a64("\(repo)\u{0}\(path)") ^ (seed &* SplitMix64.gamma))
            try writeAtomically(root: root, repo: repo, path: path) { fd, target in
                let wordsPerBlock = 1 << 17  // 1 MiB
                let block = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: wordsPerBlock)
                defer { block.deallocate() }
                var written = 0
                var nextWord: UInt64 = 0
                while written < size {
                    let bytes = min(wordsPerBlock * 8, size - written)
                    let words = (bytes + 7) / 8
                    stream.fill(block, count: words, from: &nextWord)
                    try writeAll(fd, UnsafeRawBufferPointer(start: block.baseAddress, count: bytes), target: target)
                    written += bytes
                }
            }
        }
    }

    /// Writes `<path>.testhub-partial` beside the target and renames it into place, so a
    /// scan never sees half a file.
    private static func writeAtomically(root: URL, repo: String, path: String,
                                        _ body: (Int32, String) throws -> Void) throws {
        let target = root.standardizedFileURL.path + "/" + repo + "/" + path
        let dir = (target as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        } catch {
            throw TestHubError.cannotWrite(path: dir, errno: errno == 0 ? EIO : errno)
        }
        let partial = target + RepoCatalog.partialSuffix
        let fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TestHubError.cannotWrite(path: partial, errno: errno) }
        do {
            try body(fd, partial)
        } catch {
            close(fd)
            unlink(partial)
            throw error
        }
        guard close(fd) == 0 else {
            let code = errno
            unlink(partial)
            throw TestHubError.cannotWrite(path: partial, errno: code)
        }
        guard rename(partial, target) == 0 else {
            let code = errno
            unlink(partial)
            throw TestHubError.cannotWrite(path: target, errno: code)
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, target: String) throws {
        if let code = FileIO.writeAll(fd, bytes) { throw TestHubError.cannotWrite(path: target, errno: code) }
    }

    static func fnv1a64(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in text.utf8 {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        return h
    }
}

/// `SplitMix64` read from any word on: word i of the stream is word i + 1 of the seed.
struct SplitMixStream {
    let seed: UInt64

    func fill(_ block: UnsafeMutableBufferPointer<UInt64>, count: Int, from index: inout UInt64) {
        var generator = SplitMix64(seed: seed &+ index &* SplitMix64.gamma)
        generator.fill(UnsafeMutableBufferPointer(rebasing: block[0 ..< count]))
        index &+= UInt64(count)
    }
}
