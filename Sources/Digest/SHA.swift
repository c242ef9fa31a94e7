// Digest - incremental SHA-256 and SHA-1 over OpenSSL libcrypto.
//
// SHA-256 verifies LFS files (the Hub's `lfs.oid`) and its state can be saved and
// restored, so a download that hashes bytes as they arrive can resume its hash after
// a crash. SHA-1 gives git blob ids: the test Hub's, and the check of every file git stores itself.
import CCrypto
import Foundation
import SharedFiles

/// libcrypto, loaded with dlopen at the first hasher (Sources/CCrypto/include/CCrypto.h).
public enum CryptoLibrary {
    /// Loads libcrypto once. The entry points that hash files (`StagingFile`, the cache's
    /// verify and import) call this first, so a missing libcrypto is an error the caller
    /// sees, not a crash.
    public static func load() throws {
        guard sf_crypto_load(nil, 0) != 0 else { return }  // loaded (the common case): no buffer
        var reason = [CChar](repeating: 0, count: 512)
        guard sf_crypto_load(&reason, reason.count) != 0 else { return }
        throw CryptoUnavailable(reason: String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// For the hashers' initializers: traps only when a hasher is made without an entry point's
    /// `load()` having succeeded, and the library is missing.
    static func loaded() {
        do { try load() } catch { fatalError("\(error)") }
    }
}

/// libcrypto could not be loaded: a broken installation, with what to install.
public struct CryptoUnavailable: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public var description: String {
        "cannot load libcrypto (\(reason)); install it with `apt-get install libssl3` and try again"
    }
}

/// An incremental SHA-256 with a savable state (lowercase hex out).
public struct SHA256: Sendable {
    private var ctx = SHA256_CTX()
    /// Bytes hashed so far.
    public private(set) var count: Int64 = 0

    public init() {
        CryptoLibrary.loaded()
        sf_sha256_init(&ctx)
    }

    /// SHA-256 of a short input without libcrypto (the same digest as `hex(of:)`): for names
    /// derived from a few hundred bytes (the spool's ids) in processes that never hash a file.
    public static func smallHex(of data: Data) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        data.withUnsafeBytes { sf_sha256_small($0.baseAddress, $0.count, &out) }
        return hexString(out)
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        sf_sha256_update(&ctx, base, bytes.count)
        count += Int64(bytes.count)
    }

    public mutating func update(_ data: Data) { data.withUnsafeBytes { update($0) } }

    /// The digest of everything hashed so far; the hasher itself is left as it was.
    public func finalizeHex() -> String {
        var copy = ctx
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        sf_sha256_final(&out, &copy)
        return hexString(out)
    }

    /// The hash state as bytes, to store beside a partial file (same machine architecture only).
    public var savedState: Data {
        var data = withUnsafeBytes(of: ctx) { Data($0) }
        withUnsafeBytes(of: count.littleEndian) { data.append(contentsOf: $0) }
        return data
    }

    /// Restores a state from `savedState`; nil when the bytes are not a state of this build.
    public init?(savedState data: Data) {
        CryptoLibrary.loaded()
        let ctxSize = MemoryLayout<SHA256_CTX>.size
        guard data.count == ctxSize + 8 else { return nil }
        var restored = SHA256_CTX()
        withUnsafeMutableBytes(of: &restored) { $0.copyBytes(from: data.prefix(ctxSize)) }
        var n: Int64 = 0
        withUnsafeMutableBytes(of: &n) { $0.copyBytes(from: data.suffix(8)) }
        ctx = restored
        count = Int64(littleEndian: n)
        guard count >= 0, restored.md_len == UInt32(SHA256_DIGEST_LENGTH) else { return nil }
    }

    public static func hex(of data: Data) -> String {
        var h = SHA256()
        h.update(data)
        return h.finalizeHex()
    }

    /// Hashes a whole file by streaming it in 1 MiB reads.
    public static func hex(ofFileAt path: String) throws -> String {
        try CryptoLibrary.load()
        var h = SHA256()
        try streamFile(path, from: 0, to: nil) { h.update($0) }
        return h.finalizeHex()
    }

    /// Feeds the bytes of an open file in `[from, to)` (to end of file when `to` is nil);
    /// `path` only names it in errors.
    public mutating func update(fileDescriptor fd: Int32, path: String, from: Int64, to: Int64?) throws {
        var h = self
        try streamFile(fd: fd, path: path, from: from, to: to) { h.update($0) }
        self = h
    }
}

/// An incremental SHA-1 (lowercase hex out): git blob ids.
public struct SHA1: Sendable {
    private var ctx = SHA_CTX()

    public init() {
        CryptoLibrary.loaded()
        sf_sha1_init(&ctx)
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        sf_sha1_update(&ctx, base, bytes.count)
    }

    public mutating func update(_ data: Data) { data.withUnsafeBytes { update($0) } }

    public func finalizeHex() -> String {
        var copy = ctx
        var out = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        sf_sha1_final(&out, &copy)
        return hexString(out)
    }

    public static func hex(of data: Data) -> String {
        var h = SHA1()
        h.update(data)
        return h.finalizeHex()
    }

    /// The git blob id of `size` bytes of an open file from offset 0: SHA-1 of `blob <size>\0`
    /// followed by the bytes (what the Hub's tree lists as `oid` for files git stores itself).
    /// `path` only names the file in errors; a file shorter than `size` is an error too.
    public static func gitBlobID(fileDescriptor fd: Int32, path: String, size: Int64) throws -> String {
        try CryptoLibrary.load()
        var h = SHA1()
        h.update(Data("blob \(size)\u{0}".utf8))
        var read: Int64 = 0
        try streamFile(fd: fd, path: path, from: 0, to: size) { h.update($0); read += Int64($0.count) }
        guard read == size else { throw DigestError.unreadable(path: path, errno: EIO) }
        return h.finalizeHex()
    }
}

/// Errors of this module: reading a file to hash it failed.
public enum DigestError: Error, CustomStringConvertible {
    case unreadable(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .unreadable(let path, let code):
            return "cannot read \(path) to hash it: \(String(cString: strerror(code)))"
        }
    }
}

func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var chars = [UInt8]()
    chars.reserveCapacity(bytes.count * 2)
    for b in bytes {
        chars.append(digits[Int(b >> 4)])
        chars.append(digits[Int(b & 0x0f)])
    }
    return String(decoding: chars, as: UTF8.self)
}

func streamFile(_ path: String, from: Int64, to: Int64?, _ body: (UnsafeRawBufferPointer) -> Void) throws {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw DigestError.unreadable(path: path, errno: errno) }
    defer { close(fd) }
    try streamFile(fd: fd, path: path, from: from, to: to, body)
}

func streamFile(fd: Int32, path: String, from: Int64, to: Int64?, _ body: (UnsafeRawBufferPointer) -> Void) throws {
    if let code = FileIO.stream(fd, from: from, to: to, { body($0); return true }).errno {
        throw DigestError.unreadable(path: path, errno: code)
    }
}
