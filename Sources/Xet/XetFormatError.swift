/// What is wrong with Xet bytes or a reconstruction from outside: each names the thing and the
/// number that was refused.
public enum XetFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    case truncatedHeader(Int)
    case unknownHeaderVersion(UInt8)
    case unknownScheme(UInt8)
    case chunkTooLarge(Int, limit: Int)
    case lengthMismatch(stored: Int, uncompressed: Int)
    case decompressionFailed(scheme: ChunkScheme, reason: String)
    case truncatedChunk(index: Int, have: Int, need: Int)
    case reconstruction(String)

    public var description: String {
        switch self {
        case .truncatedHeader(let n):
            return "a Xet chunk header is 8 bytes, only \(n) arrived (the xorb range ended early; fetch it again)"
        case .unknownHeaderVersion(let v):
            return "a Xet chunk header has version \(v), this client reads version 0 (the xorb bytes are damaged or newer than this client)"
        case .unknownScheme(let s):
            return "a Xet chunk is stored with compression scheme \(s), this client knows 0 (none), 1 (LZ4) and 2 (byte grouping + LZ4)"
        case .chunkTooLarge(let n, let limit):
            return "a Xet chunk claims \(n) bytes, more than the \(limit) a chunk may have (the xorb bytes are damaged)"
        case .lengthMismatch(let stored, let uncompressed):
            return "an uncompressed Xet chunk is stored as \(stored) bytes but claims \(uncompressed) (the xorb bytes are damaged)"
        case .decompressionFailed(let scheme, let reason):
            return "a Xet chunk stored with scheme \(scheme.rawValue) did not decompress: \(reason) (the xorb bytes are damaged)"
        case .truncatedChunk(let index, let have, let need):
            return "Xet chunk \(index) needs \(need) stored bytes, the xorb range ended after \(have) (fetch the range again)"
        case .reconstruction(let what):
            return "the Xet reconstruction is not usable: \(what)"
        }
    }
}
