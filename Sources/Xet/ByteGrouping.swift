/// Xet's byte grouping (the first half of scheme 2): the bytes at positions i % 4 == g gathered
/// into group g, groups concatenated. Floating-point weights compress better so: the exponent
/// bytes of neighbouring values sit together. With a length not divisible by 4, the first
/// length % 4 groups hold one byte more (which is where i % 4 == g puts the leftover bytes).
public enum ByteGrouping {
    public static func group(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let n = bytes.count
        var out = [UInt8](repeating: 0, count: n)
        var o = 0
        for g in 0..<4 {
            var i = g
            while i < n {
                out[o] = bytes[i]
                o += 1
                i += 4
            }
        }
        return out
    }

    public static func ungroup(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let n = bytes.count
        var out = [UInt8](repeating: 0, count: n)
        var o = 0
        for g in 0..<4 {
            var i = g
            while i < n {
                out[i] = bytes[o]
                o += 1
                i += 4
            }
        }
        return out
    }
}
