import Foundation
import XCTest

/// A test case with a fresh folder of its own under the temporary directory (`scratch`), removed
/// after each test: the set-up every test on real files without a Hub shares.
class ScratchDirectoryTestCase: XCTestCase {
    var scratch: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("\(type(of: self))-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: scratch)
        try super.tearDownWithError()
    }
}
