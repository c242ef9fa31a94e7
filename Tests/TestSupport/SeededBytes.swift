// Deterministic bytes for the Xet tests' files: the same seed gives the same bytes on every run,
// so the byte counts the tests assert (xorb bytes fetched for a revision) stay exact.
import Foundation

/// `count` bytes of a splitmix64 stream started from `seed`.
public func seededBytes(_ count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var out = Data(capacity: count + 8)
    while out.count < count {
        state = state &+ 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        withUnsafeBytes(of: z) { out.append(contentsOf: $0) }
    }
    return out.prefix(count)
}
