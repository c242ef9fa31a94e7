// Resolve and the CDN: redirects with linked metadata, direct small files, ranges, access.
import Digest
import Foundation
import TestHub
import XCTest

final class ResolveTests: HubTestCase {
    func testResolveRedirectsAnLFSFileWithItsLinkedMetadata() throws {
        let sha256 = SHA256.hex(of: try bytes("model.safetensors"))
        let r = try client.request("HEAD", "/org/model/resolve/main/model.safetensors")
        XCTAssertEqual(r.status, 302)
        XCTAssertEqual(r.header("X-Linked-Etag"), "\"\(sha256)\"")
        XCTAssertEqual(r.header("ETag"), "\"\(sha256)\"")
        XCTAssertEqual(r.header("X-Linked-Size"), String(Self.lfsSize))
        XCTAssertEqual(r.header("X-Repo-Commit"), try commit())
        XCTAssertEqual(r.header("Content-Length"), "0")
        let location = try XCTUnwrap(r.header("Location"))
        XCTAssertTrue(location.hasPrefix("\(hub.cdnURL)/cdn/org/model/\(try commit())/model.safetensors?"), location)
        let get = try client.request("GET", "/org/model/resolve/\(try commit())/model.safetensors")
        XCTAssertEqual(get.status, 302)
        XCTAssertTrue(get.body.isEmpty)
    }

    func testResolveServesASmallFileWithItsGitBlobETag() throws {
        let head = try client.request("HEAD", "/org/model/resolve/main/config.json")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("ETag"), "\"\(Self.gitBlobID(Self.config))\"")
        XCTAssertEqual(head.header("Content-Length"), String(Self.config.count))
        XCTAssertEqual(head.header("X-Repo-Commit"), try commit())
        let get = try client.request("GET", "/org/model/resolve/main/config.json")
        XCTAssertEqual(get.status, 200)
        XCTAssertEqual(get.body, Self.config)
        let nested = try client.request("GET", "/org/model/resolve/main/sub/dir/x.txt")
        XCTAssertEqual(nested.body, Data("deep\n".utf8))
    }

    func testResolveHonoursRangeOnSmallFiles() throws {
        let r = try client.request("GET", "/org/model/resolve/main/config.json", headers: ["Range": "bytes=2-5"])
        XCTAssertEqual(r.status, 206)
        XCTAssertEqual(r.header("Content-Range"), "bytes 2-5/\(Self.config.count)")
        XCTAssertEqual(r.body, Self.config.subdata(in: 2 ..< 6))
    }

    func testUnknownPathIsEntryNotFound() throws {
        let r = try client.request("HEAD", "/org/model/resolve/main/missing.bin")
        XCTAssertEqual(r.status, 404)
        XCTAssertEqual(r.header("X-Error-Code"), "EntryNotFound")
        XCTAssertEqual(r.header("X-Repo-Commit"), try commit())
    }

    func testResolveOfAnUnknownRevisionIsRevisionNotFound() throws {
        let r = try client.request("GET", "/org/model/resolve/\(String(repeating: "a", count: 40))/config.json")
        XCTAssertEqual(r.status, 404)
        XCTAssertEqual(r.header("X-Error-Code"), "RevisionNotFound")
    }

    func testCDNServesTheWholeBodyWithItsETag() throws {
        let r = try RawHTTPClient.fetch(try cdnLocation())
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body, try bytes("model.safetensors"))
        XCTAssertEqual(r.header("Accept-Ranges"), "bytes")
        XCTAssertEqual(r.header("ETag"), "\"\(SHA256.hex(of: r.body))\"")
    }

    func testCDNHonoursRanges() throws {
        let location = try cdnLocation()
        let data = try bytes("model.safetensors")
        let cases: [(String, Range<Int>)] = [
            ("bytes=10-19", 10 ..< 20),
            ("bytes=\(Self.lfsSize - 5)-", Self.lfsSize - 5 ..< Self.lfsSize),
            ("bytes=-7", Self.lfsSize - 7 ..< Self.lfsSize),
            ("bytes=100-\(Self.lfsSize + 1000)", 100 ..< Self.lfsSize),
        ]
        for (range, expected) in cases {
            let r = try RawHTTPClient.fetch(location, headers: ["Range": range])
            XCTAssertEqual(r.status, 206, range)
            XCTAssertEqual(r.header("Content-Range"), "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(Self.lfsSize)", range)
            XCTAssertEqual(r.body, data.subdata(in: expected), range)
        }
        let beyond = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=\(Self.lfsSize)-"])
        XCTAssertEqual(beyond.status, 416)
        XCTAssertEqual(beyond.header("Content-Range"), "bytes */\(Self.lfsSize)")
    }

    func testCDNRefusesATamperedSignature() throws {
        let location = try cdnLocation().replacingOccurrences(of: "sig=", with: "sig=0")
        XCTAssertEqual(try RawHTTPClient.fetch(location).status, 403)
    }

    func testGatedRepoNeedsItsToken() throws {
        hub.setGated(Self.repo, token: "hf_open")
        for target in ["/api/models/org/model/revision/main", "/org/model/resolve/main/config.json"] {
            let none = try client.request("GET", target)
            XCTAssertEqual(none.status, 401, target)
            XCTAssertEqual(none.header("X-Error-Code"), "GatedRepo", target)
            let wrong = try client.request("GET", target, headers: ["Authorization": "Bearer hf_wrong"])
            XCTAssertEqual(wrong.status, 403, target)
            XCTAssertEqual(wrong.header("X-Error-Code"), "GatedRepo", target)
            XCTAssertEqual(try client.request("GET", target, headers: ["Authorization": "Bearer hf_open"]).status, 200)
        }
        let info = try client.request("GET", "/api/models/org/model", headers: ["Authorization": "Bearer hf_open"])
        XCTAssertEqual((info.json as? [String: Any])?["gated"] as? String, "auto")
        let head = try client.request("HEAD", "/org/model/resolve/main/model.safetensors", headers: ["Authorization": "Bearer hf_open"])
        let cdn = try RawHTTPClient.fetch(try XCTUnwrap(head.header("Location")))
        XCTAssertEqual(cdn.status, 200, "the CDN needs no token")
    }

    func testPrivateRepoLooksMissingWithoutItsToken() throws {
        hub.setPrivateToken(Self.repo, token: "hf_mine")
        let none = try client.request("GET", "/api/models/org/model/revision/main")
        XCTAssertEqual(none.status, 401)
        XCTAssertEqual(none.header("X-Error-Code"), "RepoNotFound")
        let mine = try client.request("GET", "/api/models/org/model/revision/main", headers: ["Authorization": "Bearer hf_mine"])
        XCTAssertEqual((mine.json as? [String: Any])?["private"] as? Bool, true)
    }

    func testAuthorizationIsRecordedPerListener() throws {
        _ = try client.request("GET", "/api/models/org/model", headers: ["Authorization": "Bearer x"])
        _ = try RawHTTPClient.fetch(try cdnLocation())
        XCTAssertTrue(hub.sawAuthorization(onCDN: false))
        XCTAssertFalse(hub.sawAuthorization(onCDN: true))
        _ = try RawHTTPClient.fetch(try cdnLocation(), method: "HEAD", headers: ["Authorization": "Bearer x"])
        XCTAssertTrue(hub.sawAuthorization(onCDN: true))
    }
}

/// The CDN under another loopback address than the Hub's, as `speech-testhub` serves it by
/// default: the redirect changes host, as the Hub's CDN redirects do.
final class CDNHostTests: XCTestCase {
    func testTheCDNCanListenOnAnotherLoopbackAddressAndRedirectsNameIt() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("testhub-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try TestHub.generateRepo(root: root, repo: "org/model", files: ["model.safetensors": 200_000])
        let hub = try TestHub(root: root, cdnHost: "127.0.0.2")
        defer { hub.stop() }
        XCTAssertTrue(hub.cdnURL.hasPrefix("http://127.0.0.2:"), hub.cdnURL)
        let head = try RawHTTPClient(hub.baseURL).request("HEAD", "/org/model/resolve/main/model.safetensors")
        XCTAssertEqual(head.status, 302)
        let location = try XCTUnwrap(head.header("Location"))
        XCTAssertTrue(location.hasPrefix(hub.cdnURL + "/cdn/"), location)
        let body = try RawHTTPClient.fetch(location)
        XCTAssertEqual(body.status, 200)
        XCTAssertEqual(body.body, try Data(contentsOf: root.appendingPathComponent("org/model/model.safetensors")))
    }

    func testACDNHostOutsideLoopbackIsRefusedByName() {
        XCTAssertThrowsError(try TestHub(root: FileManager.default.temporaryDirectory, cdnHost: "10.0.0.1")) { error in
            XCTAssertEqual(error as? TestHubError, .notLoopback("10.0.0.1"))
            XCTAssertTrue("\(error)".contains("127.x.y.z"), "\(error)")
        }
    }
}
