import CBlake3

/// BLAKE3 over bytes given in pieces: the one hash every Xet name is made of (CBlake3's hasher).
public struct Blake3: Sendable {
    private var state = cblake3_hasher()

    /// The plain hash.
    public init() {
        cblake3_init(&state)
    }

    /// The keyed hash; `key` must be 32 bytes.
    public init(key: [UInt8]) {
        precondition(key.count == 32, "a BLAKE3 key is 32 bytes")
        key.withUnsafeBufferPointer { cblake3_init_keyed(&state, $0.baseAddress) }
    }

    /// The key-derivation mode with this context string.
    public init(deriveKeyContext context: String) {
        var context = context
        context.withUTF8 { cblake3_init_derive_key(&state, $0.baseAddress, $0.count) }
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        cblake3_update(&state, base, bytes.count)
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public mutating func update(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The first `count` bytes of the output (32 is the hash; more is BLAKE3's extended output).
    /// The hasher can go on taking bytes afterwards.
    public func finalize(count: Int = 32) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var copy = state
        out.withUnsafeMutableBufferPointer { cblake3_finalize(&copy, $0.baseAddress, count) }
        return out
    }

    /// Whether the whole-chunk loop runs on AVX2 (true) or in portable C (false) on this CPU.
    public static var usesSIMD: Bool { cblake3_simd_level() == 1 }

    /// Forces the portable loop (for tests that check both loops against the same answers).
    public static func forcePortable(_ on: Bool) {
        cblake3_force_portable(on ? 1 : 0)
    }
}
