/// Xet's byte grouping (the first half of scheme 2): the bytes at positions i % 4 == g gathered
/// into group g, groups concatenated. Floating-point weights compress better so: the exponent
/// bytes of neighbouring values sit together. With a length not divisible by 4, the first
/// length % 4 groups hold one byte more (which is where i % 4 == g puts the leftover bytes).
public enum ByteGrouping {
    public static func group(_ bytes: UnsafeRawBufferPointer) -> [UInt8] { permuted(bytes, grouping: true) }

    public static func ungroup(_ bytes: UnsafeRawBufferPointer) -> [UInt8] { permuted(bytes, grouping: false) }

    /// The one walk of both directions: `grouped` counts through the grouped order while
    /// `original` visits the matching position of the ungrouped order; `grouping` reads the
    /// original order and writes the grouped one, else the reverse.
    private static func permuted(_ bytes: UnsafeRawBufferPointer, grouping: Bool) -> [UInt8] {
        let n = bytes.count
        var out = [UInt8](repeating: 0, count: n)
        var grouped = 0
        for g in 0..<4 {
            for original in stride(from: g, to: n, by: 4) {
                if grouping { out[grouped] = bytes[original] } else { out[original] = bytes[grouped] }
                grouped += 1
            }
        }
        return out
    }
}
