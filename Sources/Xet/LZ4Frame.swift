import CLZ4

/// The LZ4 frame format (not raw blocks), as Xet's schemes 1 and 2 store a chunk; Debian's liblz4.
public enum LZ4Frame {
    public static func compress(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let bound = LZ4F_compressFrameBound(bytes.count, nil)
        var out = [UInt8](repeating: 0, count: bound)
        let written = out.withUnsafeMutableBytes { dst in
            LZ4F_compressFrame(dst.baseAddress, bound, bytes.baseAddress, bytes.count, nil)
        }
        // With a destination of the library's own bound, compression cannot fail.
        precondition(LZ4F_isError(written) == 0, "LZ4F_compressFrame failed within its own bound")
        out.removeSubrange(written...)
        return out
    }

    /// Decodes one whole frame that must hold exactly `length` bytes and nothing after it.
    public static func decompress(_ frame: UnsafeRawBufferPointer, length: Int) throws(XetFormatError) -> [UInt8] {
        var context: OpaquePointer?
        guard LZ4F_isError(LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))) == 0, let context else {
            throw .decompressionFailed(scheme: .lz4, reason: "liblz4 could not make a decompression context")
        }
        defer { LZ4F_freeDecompressionContext(context) }
        var out = [UInt8](repeating: 0, count: length)
        var produced = 0
        var consumed = 0
        let failure: String? = out.withUnsafeMutableBytes { dst -> String? in
            while true {
                var dstSize = length - produced
                var srcSize = frame.count - consumed
                let hint = LZ4F_decompress(context, dst.baseAddress.map { $0 + produced }, &dstSize,
                                           frame.baseAddress.map { $0 + consumed }, &srcSize, nil)
                if LZ4F_isError(hint) != 0 {
                    return String(cString: LZ4F_getErrorName(hint))
                }
                produced += dstSize
                consumed += srcSize
                if hint == 0 {
                    if consumed != frame.count { return "\(frame.count - consumed) bytes follow the frame's end" }
                    if produced != length { return "the frame holds \(produced) bytes, the header says \(length)" }
                    return nil
                }
                if dstSize == 0 && srcSize == 0 {
                    return produced == length ? "the frame holds more than the \(length) bytes the header says"
                                              : "the frame ends early, after \(produced) of \(length) bytes"
                }
            }
        }
        if let failure { throw .decompressionFailed(scheme: .lz4, reason: failure) }
        return out
    }
}
