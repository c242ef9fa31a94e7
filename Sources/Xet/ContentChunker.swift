/// Cuts a byte stream into Xet's content-defined chunks, where every other Xet client cuts it, so
/// that equal content makes equal chunks (and deduplicates).
///
/// A gear hash `h = (h << 1) + T[byte]` (64-bit, wrapping; T is `gearTable`) cuts after a byte
/// where `h & 0xFFFF000000000000 == 0` and the chunk has at least 8 KiB; a chunk never exceeds
/// 128 KiB (target 64 KiB). The hash remembers only its last 64 bytes, so the first
/// `minimumLength - 65` bytes of a chunk are skipped unhashed, as xet-core's chunker does.
/// A match before 8 KiB does not cut: `hf_xet.hash_files` agrees only so (one in ten entries of
/// T has its top 16 bits zero, so the first hashed byte alone often matches; XetFileHashTests).
public struct ContentChunker: Sendable {
    public static let minimumLength = 8 * 1024
    public static let maximumLength = 128 * 1024
    static let mask: UInt64 = 0xFFFF_0000_0000_0000
    /// Bytes at the start of a chunk that are never hashed: the hash window is 64 bytes.
    static let unhashedPrefix = minimumLength - 64 - 1

    private var hash: UInt64 = 0
    /// Bytes of the chunk in progress seen so far.
    private var pending = 0

    public init() {}

    /// Takes the next bytes of the stream; returns the lengths of the chunks they completed, in
    /// order (the first may have begun in earlier bytes).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Int] {
        var lengths: [Int] = []
        var index = 0
        let count = bytes.count
        gearTable.withUnsafeBufferPointer { table in
            while index < count {
                if pending < Self.unhashedPrefix {
                    let skip = min(Self.unhashedPrefix - pending, count - index)
                    pending += skip
                    index += skip
                    continue
                }
                var h = hash
                var length = pending
                var cut = false
                while index < count {
                    h = (h << 1) &+ table[Int(bytes[index])]
                    index += 1
                    length += 1
                    if (h & Self.mask == 0 && length >= Self.minimumLength) || length >= Self.maximumLength {
                        cut = true
                        break
                    }
                }
                hash = h
                if cut {
                    lengths.append(length)
                    pending = 0
                } else {
                    pending = length
                }
            }
        }
        return lengths
    }

    /// Ends the stream: the length of the last chunk, or nil when the stream ended on a cut.
    public mutating func finish() -> Int? {
        defer { pending = 0 }
        return pending > 0 ? pending : nil
    }

    /// The chunk lengths of a whole buffer.
    public static func chunkLengths(of bytes: UnsafeRawBufferPointer) -> [Int] {
        var chunker = ContentChunker()
        var lengths = chunker.feed(bytes)
        if let last = chunker.finish() { lengths.append(last) }
        return lengths
    }
}
