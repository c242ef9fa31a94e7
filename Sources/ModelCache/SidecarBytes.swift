// SidecarBytes - what a sidecar says about how many of its file's bytes are staged.
import Foundation

extension Sidecar {
    /// Bytes of range `index`: `rangeSize`, less for the last range.
    public func length(ofRange index: Int) -> Int64 {
        let rangeSize = max(1, self.rangeSize)
        return max(0, min(size, Int64(index + 1) * rangeSize) - Int64(index) * rangeSize)
    }

    /// Bytes of the ranges in `done`, plus the recorded prefixes (`partial`) of the others.
    public var stagedBytes: Int64 {
        let finished = Set(done)
        var bytes = finished.reduce(Int64(0)) { $0 + length(ofRange: $1) }
        for entry in partial ?? [] where !finished.contains(entry.index) { bytes += min(entry.bytes, length(ofRange: entry.index)) }
        return min(bytes, size)
    }
}
