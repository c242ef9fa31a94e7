/// SplitMix64, the one generator of seeded bytes in the test Hub and the tests: xet-core's test
/// data generator too, so bytes made with it hash as hf_xet hashes them. Word n of a seed is
/// mix(seed + n * gamma), n counting from 1; bytes are the words little-endian.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    static let gamma: UInt64 = 0x9E37_79B9_7F4A_7C15
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= Self.gamma
        return Self.mix(state)
    }

    /// The next `words.count` words, little-endian: the bulk form, for gigabytes of synthetic
    /// files. It spells `mix` out because a debug build (the tests') calls a function per word,
    /// which makes it 1.5 times slower; TestHubTests pins that both forms give the same words.
    public mutating func fill(_ words: UnsafeMutableBufferPointer<UInt64>) {
        var state = self.state
        for i in words.indices {
            state &+= Self.gamma
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            words[i] = (z ^ (z >> 31)).littleEndian
        }
        self.state = state
    }

    /// The next `count` bytes: as many words as they need, the last one cut.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var words = [UInt64](repeating: 0, count: (count + 7) / 8)
        words.withUnsafeMutableBufferPointer { fill($0) }
        return words.withUnsafeBytes { Array($0.prefix(count)) }
    }

    static func mix(_ state: UInt64) -> UInt64 {
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
