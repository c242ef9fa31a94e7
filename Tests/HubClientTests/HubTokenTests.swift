// HubTokenTests - where the credential comes from, in huggingface_hub's order.
import HubClient
import XCTest

final class HubTokenTests: XCTestCase {
    private var home: URL!

    override func setUpWithError() throws {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("hubtoken-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
    }

    override func tearDown() {
        if let home { try? FileManager.default.removeItem(at: home) }
        home = nil
    }

    /// An environment whose token file (if any) is in the temp dir, never the real home.
    private func env(_ extra: [String: String]) -> [String: String] {
        ["HF_HOME": home.path, "HOME": home.path].merging(extra) { _, new in new }
    }

    private func writeTokenFile(_ text: String) throws {
        try Data(text.utf8).write(to: home.appendingPathComponent("token"))
    }

    func testHFTokenWinsOverTheLegacyVariableAndTheFile() throws {
        try writeTokenFile("hf_from_file\n")
        XCTAssertEqual(HubToken.fromEnvironment(env(["HF_TOKEN": "hf_new", "HUGGING_FACE_HUB_TOKEN": "hf_old"])), "hf_new")
    }

    func testLegacyVariableIsUsedWhenHFTokenIsUnset() {
        XCTAssertEqual(HubToken.fromEnvironment(env(["HUGGING_FACE_HUB_TOKEN": "hf_old"])), "hf_old")
    }

    func testBlankHFTokenFallsThroughToTheLegacyVariable() {
        XCTAssertEqual(HubToken.fromEnvironment(env(["HF_TOKEN": "  \n", "HUGGING_FACE_HUB_TOKEN": "hf_old"])), "hf_old")
    }

    func testBlankHFTokenFallsThroughToTheTokenFile() throws {
        try writeTokenFile("hf_from_file")
        XCTAssertEqual(HubToken.fromEnvironment(env(["HF_TOKEN": ""])), "hf_from_file")
    }

    func testTokenFileUnderHFHomeIsReadAndTrimmed() throws {
        try writeTokenFile("  hf_from_file \n\n")
        XCTAssertEqual(HubToken.fromEnvironment(env([:])), "hf_from_file")
    }

    func testBlankTokenFileIsIgnored() throws {
        try writeTokenFile(" \n\t\n")
        XCTAssertNil(HubToken.fromEnvironment(env([:])))
    }

    func testEmptyHFHomeFallsBackToTheCacheUnderHome() throws {
        let dir = home.appendingPathComponent(".cache/huggingface")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try Data("hf_home_cache\n".utf8).write(to: dir.appendingPathComponent("token"))
        XCTAssertEqual(HubToken.fromEnvironment(["HF_HOME": "", "HOME": home.path]), "hf_home_cache")
    }

    func testNoTokenAnywhereIsNil() {
        XCTAssertNil(HubToken.fromEnvironment(env([:])))
    }
}
