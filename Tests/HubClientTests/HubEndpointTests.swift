// HubEndpointTests - HF_ENDPOINT parsing: what counts as a mirror, what falls back to the default.
import HubClient
import XCTest

final class HubEndpointTests: XCTestCase {
    private func endpoint(env value: String?) -> HubEndpoint {
        HubEndpoint.fromEnvironment(value.map { ["HF_ENDPOINT": $0] } ?? [:])
    }

    /// `url` read as an endpoint keeps its spelling and has these parts.
    private func assertParts(of url: String, scheme: String, host: String, port: Int,
                             file: StaticString = #filePath, line: UInt = #line) throws {
        let e = try XCTUnwrap(HubEndpoint(url), file: file, line: line)
        XCTAssertEqual([e.url, e.scheme, e.host], [url, scheme, host], file: file, line: line)
        XCTAssertEqual(e.port, port, file: file, line: line)
    }

    func testValidHTTPSEndpointIsUsedAsIs() throws {
        try assertParts(of: "https://hf-mirror.com", scheme: "https", host: "hf-mirror.com", port: 443)
        XCTAssertEqual(endpoint(env: "https://hf-mirror.com").url, "https://hf-mirror.com")
    }

    func testHTTPEndpointKeepsItsPort() throws {
        try assertParts(of: "http://127.0.0.1:8080", scheme: "http", host: "127.0.0.1", port: 8080)
        XCTAssertEqual(endpoint(env: "http://127.0.0.1:8080").port, 8080)
    }

    func testHTTPEndpointWithoutPortDefaultsToPort80() throws {
        XCTAssertEqual(try XCTUnwrap(HubEndpoint("http://mirror.local")).port, 80)
    }

    func testSurroundingWhitespaceIsTrimmed() {
        XCTAssertEqual(endpoint(env: "  https://hf-mirror.com \n").url, "https://hf-mirror.com")
        XCTAssertNil(HubEndpoint.ignoredValueWarning(["HF_ENDPOINT": "\thttps://hf-mirror.com  "]))
    }

    func testTrailingSlashIsTrimmed() {
        XCTAssertEqual(endpoint(env: "https://hf-mirror.com/").url, "https://hf-mirror.com")
        XCTAssertEqual(HubEndpoint("http://127.0.0.1:8080/")?.url, "http://127.0.0.1:8080")
    }

    func testUnsetEndpointIsTheDefaultHub() {
        XCTAssertEqual(endpoint(env: nil).url, HubEndpoint.defaultURL)
        XCTAssertEqual(HubEndpoint.defaultURL, "https://huggingface.co")
    }

    func testBlankEndpointFallsBackToTheDefault() {
        XCTAssertEqual(endpoint(env: "").url, HubEndpoint.defaultURL)
        XCTAssertEqual(endpoint(env: "   \n").url, HubEndpoint.defaultURL)
    }

    func testMalformedEndpointsFallBackToTheDefault() {
        for raw in ["hf-mirror.com", "ftp://x", "https://", "not a url"] {
            XCTAssertNil(HubEndpoint(raw), "\(raw) must not parse as an endpoint")
            XCTAssertEqual(endpoint(env: raw).url, HubEndpoint.defaultURL, "HF_ENDPOINT=\(raw)")
        }
    }

    func testIgnoredValueWarningSpeaksUpForMalformedValuesOnly() {
        for raw in ["hf-mirror.com", "ftp://x", "https://", "not a url"] {
            let warning = HubEndpoint.ignoredValueWarning(["HF_ENDPOINT": raw])
            XCTAssertNotNil(warning, "HF_ENDPOINT=\(raw) should be warned about")
            XCTAssertTrue(warning?.contains(raw) ?? false, "the warning should quote the value: \(warning ?? "nil")")
            XCTAssertTrue(warning?.contains(HubEndpoint.defaultURL) ?? false, "the warning should name the fallback")
        }
        XCTAssertNil(HubEndpoint.ignoredValueWarning([:]))
        XCTAssertNil(HubEndpoint.ignoredValueWarning(["HF_ENDPOINT": "https://hf-mirror.com"]))
        XCTAssertNil(HubEndpoint.ignoredValueWarning(["HF_ENDPOINT": "http://127.0.0.1:8080/"]))
    }

    func testSameOriginComparesSchemeHostAndPort() throws {
        let local = try XCTUnwrap(HubEndpoint("http://127.0.0.1:8080"))
        XCTAssertTrue(local.isSameOrigin("http://127.0.0.1:8080/org/name/resolve/main/a.json"))
        XCTAssertFalse(local.isSameOrigin("http://127.0.0.1:8081/org/name/resolve/main/a.json"), "other port")
        XCTAssertFalse(local.isSameOrigin("https://127.0.0.1:8080/x"), "other scheme")
        XCTAssertFalse(local.isSameOrigin("http://localhost:8080/x"), "other host")
        XCTAssertFalse(local.isSameOrigin("http://127.0.0.1/x"), "default port 80 is not 8080")
        XCTAssertFalse(local.isSameOrigin("not a url"))

        let hub = try XCTUnwrap(HubEndpoint("https://huggingface.co"))
        XCTAssertTrue(hub.isSameOrigin("https://huggingface.co/api/models/a/b"))
        XCTAssertTrue(hub.isSameOrigin("https://huggingface.co:443/x"), "explicit default port")
        XCTAssertTrue(hub.isSameOrigin("HTTPS://HuggingFace.co/x"), "scheme and host ignore case")
        XCTAssertFalse(hub.isSameOrigin("http://huggingface.co/x"))
        XCTAssertFalse(hub.isSameOrigin("https://cdn-lfs.huggingface.co/x"))
        XCTAssertFalse(hub.isSameOrigin("https://huggingface.co.evil.example/x"))
        XCTAssertFalse(hub.isSameOrigin("https://huggingface.co:8443/x"))
    }
}
