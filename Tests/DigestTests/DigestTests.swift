// The built-in SHA-256 for short inputs (spool ids) against known vectors and against OpenSSL.
import Digest
import Foundation
import XCTest

final class DigestTests: XCTestCase {
    func testSmallSHA256MatchesKnownVectors() {
        XCTAssertEqual(SHA256.smallHex(of: Data()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.smallHex(of: Data("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.smallHex(of: Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    func testSmallSHA256MatchesOpenSSLAtEveryPaddingBoundary() {
        var generator = SystemRandomNumberGenerator()
        // Every length up to three blocks (the padding cases 55/56/63/64 among them), then larger.
        for length in Array(0...200) + [1000, 4096, 65_537, 1 << 20] {
            let data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            XCTAssertEqual(SHA256.smallHex(of: data), SHA256.hex(of: data), "length \(length)")
        }
    }
}
