// ContentHash - the one hasher of a file's content as the Hub names it: the sha256 of an LFS file,
// the git blob id (SHA-1 of `blob <size>\0` and the bytes) of any file git stores itself. The
// cache's checks (`speech cache verify`, `import-hf`, a huggingface_hub blob found in place) hash
// through it.
import Foundation
import SharedFiles

public struct ContentHasher {
    private var sha256: SHA256?
    private var sha1: SHA1?
    /// Bytes hashed so far (the git blob header not counted).
    public private(set) var bytes: Int64 = 0

    /// `lfs`: the file is named by its sha256; else by its git blob id, which needs its `size` first.
    public init(lfs: Bool, size: Int64) {
        if lfs {
            sha256 = SHA256()
        } else {
            var h = SHA1()
            h.update(Data("blob \(size)\u{0}".utf8))
            sha1 = h
        }
    }

    public mutating func update(_ chunk: UnsafeRawBufferPointer) {
        sha256?.update(chunk)
        sha1?.update(chunk)
        bytes += Int64(chunk.count)
    }

    /// The content id, lowercase hex.
    public func finalizeHex() -> String { sha256?.finalizeHex() ?? sha1?.finalizeHex() ?? "" }

    /// The content id of the file behind `fd` read from its start to its end, and the bytes
    /// read; nil on a read error. libcrypto must be loaded (`CryptoLibrary.load()`).
    public static func hash(_ fd: Int32, lfs: Bool, size: Int64) -> (hex: String, bytes: Int64)? {
        var hasher = ContentHasher(lfs: lfs, size: size)
        guard FileIO.stream(fd, { hasher.update($0); return true }).errno == nil else { return nil }
        return (hasher.finalizeHex(), hasher.bytes)
    }

    /// True for exactly `length` lowercase hex digits: 64 a sha256, 40 a git blob id or a commit.
    public static func isHex(_ s: String, length: Int) -> Bool {
        s.utf8.count == length && s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
