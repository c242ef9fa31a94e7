// Deterministic bytes for the Xet tests' files: the same seed gives the same bytes on every run,
// so the byte counts the tests assert (xorb bytes fetched for a revision) stay exact.
import Foundation
import TestHub

/// `count` bytes of TestHub's `SplitMix64` from `seed`, its first word skipped: the bytes these
/// tests' seeds were chosen and their bounds measured on.
public func seededBytes(_ count: Int, seed: UInt64) -> Data {
    var generator = SplitMix64(seed: seed)
    _ = generator.next()
    return Data(generator.bytes(count))
}
