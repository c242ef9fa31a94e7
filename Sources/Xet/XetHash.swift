/// A 32-byte Xet name (a chunk, xorb or file hash, or a Merkle node), held as Xet holds it: four
/// 64-bit words read little-endian from the bytes.
public struct XetHash: Hashable, Sendable, CustomStringConvertible {
    public var words: (UInt64, UInt64, UInt64, UInt64)

    public static let zero = XetHash(words: (0, 0, 0, 0))

    public init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    /// The hash of these 32 bytes (BLAKE3's output order).
    public init(bytes: [UInt8]) {
        precondition(bytes.count == 32, "a Xet hash is 32 bytes")
        func word(_ i: Int) -> UInt64 {
            var w: UInt64 = 0
            for b in 0..<8 { w |= UInt64(bytes[8 * i + b]) << (8 * UInt64(b)) }
            return w
        }
        words = (word(0), word(1), word(2), word(3))
    }

    /// Parses Xet's hex form (64 hex digits, see `hex`); nil for anything else.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 64 else { return nil }
        var parsed: [UInt64] = []
        for group in 0..<4 {
            var w: UInt64 = 0
            for c in utf8[(16 * group)..<(16 * group + 16)] {
                // The standard library's hex digits: 0-9, a-f, A-F (a lone byte reaches no other).
                guard let digit = Character(Unicode.Scalar(c)).hexDigitValue else { return nil }
                w = w << 4 | UInt64(digit)
            }
            parsed.append(w)
        }
        words = (parsed[0], parsed[1], parsed[2], parsed[3])
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for w in [words.0, words.1, words.2, words.3] {
            for b in 0..<8 { out.append(UInt8(truncatingIfNeeded: w >> (8 * UInt64(b)))) }
        }
        return out
    }

    /// Xet's hex form: each word printed as 16 hex digits, so not the plain hex of `bytes`
    /// (the bytes of each 8-byte group appear reversed).
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for w in [words.0, words.1, words.2, words.3] {
            for shift in stride(from: 60, through: 0, by: -4) {
                out.append(digits[Int((w >> UInt64(shift)) & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    public static func == (a: XetHash, b: XetHash) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}

/// The keys and keyed hashes that make Xet's names (xet-core's merklehash; docs/xet.md).
public enum XetHashing {
    /// Keys a chunk's hash.
    public static let dataKey: [UInt8] = [
        102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28,
        157, 228, 33, 16, 155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41,
    ]
    /// Keys a Merkle node's hash.
    public static let internalNodeKey: [UInt8] = [
        1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230,
        93, 221, 83, 111, 55, 199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63,
    ]

    /// A chunk's hash: BLAKE3 keyed with the data key over its uncompressed bytes.
    public static func chunkHash(_ bytes: UnsafeRawBufferPointer) -> XetHash {
        var hasher = Blake3(key: dataKey)
        hasher.update(bytes)
        return XetHash(bytes: hasher.finalize())
    }

    public static func chunkHash(_ bytes: [UInt8]) -> XetHash {
        bytes.withUnsafeBytes { chunkHash($0) }
    }

    public static func chunkHash(_ bytes: ArraySlice<UInt8>) -> XetHash {
        bytes.withUnsafeBytes { chunkHash($0) }
    }

    /// A file's hash (the Hub's `X-Xet-Hash`): BLAKE3 keyed with 32 zero bytes over the Merkle
    /// root of its chunks; all zeros for an empty file.
    public static func fileHash(root: XetHash, isEmpty: Bool) -> XetHash {
        if isEmpty { return .zero }
        var hasher = Blake3(key: [UInt8](repeating: 0, count: 32))
        hasher.update(root.bytes)
        return XetHash(bytes: hasher.finalize())
    }
}
