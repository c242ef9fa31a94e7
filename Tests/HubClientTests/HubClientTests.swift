// HubClientTests - the client against a running test Hub over loopback HTTP: resolution,
// the paginated tree, typed errors, retries, and where the token may go.
import Foundation
import HubClient
import HubTypes
import TestHub
import XCTest

final class HubClientTests: HubTestCase {
    private let repoName = "acme/tiny-tts"
    private let files: [String: Int] = [
        "config.json": 300,
        "tokenizer/vocab.txt": 1_000,
        "tokenizer/merges/merges.txt": 500,
        "voices/af_heart.json": 64,
        "model.safetensors": 2 << 20,
    ]

    private var repo: RepoID!

    override func setUpWithError() throws {
        try super.setUpWithError()
        repo = try RepoID(repoName)
        try TestHub.generateRepo(root: root, repo: repoName, files: files)
    }

    // MARK: Resolution and listing

    func testCommitOfMainIsAStable40HexID() throws {
        let client = try client()
        let first = try client.commit(of: repo, revision: "main")
        let second = try client.commit(of: repo, revision: "main")
        XCTAssertTrue(Self.isCommitID(first), "not a commit id: \(first)")
        XCTAssertEqual(first, second)
        XCTAssertEqual(try client.commit(of: repo, revision: first), first, "a commit id resolves to itself")
    }

    func testTreeListingFollowsEveryPageAndDropsDirectories() throws {
        hub.treePageSize = 2
        let client = try client()
        let commit = try client.commit(of: repo, revision: "main")
        hub.resetCounters()

        let listed = try client.files(of: repo, commit: commit)

        XCTAssertEqual(listed.count, files.count, "every file once, no directories: \(listed.map(\.path))")
        XCTAssertEqual(Set(listed.map(\.path)), Set(files.keys))
        for file in listed {
            XCTAssertEqual(file.size, Int64(files[file.path] ?? -1), file.path)
        }
        // 5 files + 3 directories (tokenizer, tokenizer/merges, voices) = 8 entries = 4 pages of 2.
        let treeRequests = hub.requestLog().filter { $0.hasPrefix("hub GET ") && $0.contains("/tree/") }
        XCTAssertEqual(treeRequests.count, 4, "\(treeRequests)")
        XCTAssertEqual(treeRequests.filter { $0.contains("cursor=") }.count, 3, "\(treeRequests)")
        XCTAssertTrue(treeRequests.allSatisfy { $0.contains(commit) }, "pages stay pinned to the commit")
    }

    func testLFSFileCarriesTheSHA256OfItsContentAndSmallFilesNone() throws {
        let client = try client()
        let listed = try client.snapshot(of: repo, revision: "main")
        XCTAssertTrue(Self.isCommitID(listed.commit))
        let byPath = Dictionary(uniqueKeysWithValues: listed.files.map { ($0.path, $0) })

        let lfs = try XCTUnwrap(byPath["model.safetensors"])
        XCTAssertEqual(lfs.sha256, try sha256sum(repoName, "model.safetensors"))
        XCTAssertTrue(lfs.isLFS)
        XCTAssertEqual(lfs.size, 2 << 20)

        let small = try XCTUnwrap(byPath["config.json"])
        XCTAssertNil(small.sha256)
        XCTAssertFalse(small.isLFS)
        XCTAssertEqual(small.blobID.count, 40, "a small file keeps its git blob id")
    }

    func testSHA256PrefixOnLFSOidIsStripped() throws {
        hub.lfsOidPrefix = true
        let client = try client()
        let commit = try client.commit(of: repo, revision: "main")
        let lfs = try XCTUnwrap(try client.files(of: repo, commit: commit).first { $0.path == "model.safetensors" })
        XCTAssertEqual(lfs.sha256, try sha256sum(repoName, "model.safetensors"))
    }

    func testLocateOfASmallFileStaysOnTheHubWithItsBlobETag() throws {
        let client = try client()
        let snapshot = try client.snapshot(of: repo, revision: "main")
        let location = try client.locate(repo, commit: snapshot.commit, path: "tokenizer/vocab.txt")
        XCTAssertTrue(location.isHubOrigin)
        XCTAssertEqual(location.url, client.resolveURL(repo, commit: snapshot.commit, path: "tokenizer/vocab.txt"))
        XCTAssertEqual(location.size, 1_000)
        XCTAssertEqual(location.commit, snapshot.commit)
        XCTAssertEqual(location.etag, snapshot.files.first { $0.path == "tokenizer/vocab.txt" }?.blobID)
    }

    // MARK: Typed errors

    func testUnknownRepoIsRepoNotFound() throws {
        XCTAssertThrowsError(try client().commit(of: RepoID("acme/no-such-model"), revision: "main")) { error in
            guard case HubError.repoNotFound(let named) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(named.description, "acme/no-such-model")
            XCTAssertFalse((error as? HubError)?.isTransport ?? true, "an answer is not a transport failure")
            XCTAssertFalse((error as? HubError)?.isRetryable ?? true)
        }
    }

    func testUnknownRevisionIsRevisionNotFound() throws {
        XCTAssertThrowsError(try client().commit(of: repo, revision: "v9-does-not-exist")) { error in
            guard case HubError.revisionNotFound(_, let revision) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(revision, "v9-does-not-exist")
        }
    }

    func testLocatingAMissingPathIsEntryNotFound() throws {
        let client = try client()
        let commit = try client.commit(of: repo, revision: "main")
        XCTAssertThrowsError(try client.locate(repo, commit: commit, path: "missing/file.bin")) { error in
            guard case HubError.entryNotFound(_, let path) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(path, "missing/file.bin")
        }
    }

    func testGatedRepoWithoutTokenSaysToAcceptTheTermsAndSetHFToken() throws {
        hub.setGated(repoName, token: "hf_secret")
        XCTAssertThrowsError(try client().commit(of: repo, revision: "main")) { error in
            guard case HubError.gatedRepo = error else { return XCTFail("got \(error)") }
            let text = String(describing: error)
            XCTAssertTrue(text.contains("accept its terms"), text)
            XCTAssertTrue(text.contains("HF_TOKEN"), text)
        }
    }

    func testGatedRepoWithItsTokenWorks() throws {
        hub.setGated(repoName, token: "hf_secret")
        let client = try client(token: "hf_secret")
        XCTAssertTrue(client.hasToken)
        let snapshot = try client.snapshot(of: repo, revision: "main")
        XCTAssertEqual(snapshot.files.count, files.count)
    }

    func testGatedRepoWithAnotherTokenIsStillGated() throws {
        hub.setGated(repoName, token: "hf_secret")
        XCTAssertThrowsError(try client(token: "hf_wrong").commit(of: repo, revision: "main")) { error in
            guard case HubError.gatedRepo = error else { return XCTFail("got \(error)") }
        }
    }

    func testServerErrorIsATypedRetryableHTTPError() throws {
        hub.setFault(.status(code: 500, times: 1, retryAfter: nil), for: "\(repoName)/config.json")
        let client = try client()
        let commit = try client.commit(of: repo, revision: "main")
        XCTAssertThrowsError(try client.locate(repo, commit: commit, path: "config.json")) { error in
            guard case HubError.http(let status, let url, _, let retryAfter) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(status, 500)
            XCTAssertTrue(url.hasSuffix("/config.json"), url)
            XCTAssertNil(retryAfter)
            XCTAssertTrue((error as? HubError)?.isRetryable ?? false)
            XCTAssertFalse((error as? HubError)?.isTransport ?? true)
        }
    }

    func testServerErrorIsRetriedUntilItSucceeds() throws {
        hub.setFault(.status(code: 500, times: 1, retryAfter: nil), for: "\(repoName)/config.json")
        let client = try client(retry: RetryPolicy(attempts: 3, delays: [0.01]))
        let commit = try client.commit(of: repo, revision: "main")
        hub.resetCounters()
        let location = try client.locate(repo, commit: commit, path: "config.json")
        XCTAssertEqual(location.size, 300)
        XCTAssertEqual(hub.requests(for: "\(repoName)/config.json"), 2, "one refused, one answered")
    }

    func testRetryAfterFromTheServerIsReported() throws {
        hub.setFault(.status(code: 503, times: 1, retryAfter: 7), for: "\(repoName)/config.json")
        let client = try client()
        let commit = try client.commit(of: repo, revision: "main")
        XCTAssertThrowsError(try client.locate(repo, commit: commit, path: "config.json")) { error in
            XCTAssertEqual((error as? HubError)?.retryAfter, 7)
            XCTAssertTrue((error as? HubError)?.isRetryable ?? false)
        }
    }

    func testClosedPortIsATransportFailure() throws {
        let port = try closedPort()
        let client = HubClient(endpoint: try XCTUnwrap(HubEndpoint("http://127.0.0.1:\(port)")), token: nil,
                               retry: RetryPolicy(attempts: 1, delays: [0]))
        XCTAssertThrowsError(try client.commit(of: repo, revision: "main")) { error in
            guard case HubError.transport = error else { return XCTFail("got \(error)") }
            XCTAssertTrue((error as? HubError)?.isTransport ?? false)
            XCTAssertTrue((error as? HubError)?.isRetryable ?? false)
        }
        XCTAssertFalse(HubError.repoNotFound(repo).isTransport)
    }

    func testBodyCutShortIsATransportFailureNotATruncatedFile() throws {
        hub.setFault(.dropConnection(afterBytes: 100, times: 1), for: "\(repoName)/tokenizer/vocab.txt")
        let client = try client()
        let commit = try client.commit(of: repo, revision: "main")
        let url = client.resolveURL(repo, commit: commit, path: "tokenizer/vocab.txt")
        XCTAssertThrowsError(try client.fetchSmall(url, repo: repo, path: "tokenizer/vocab.txt")) { error in
            guard case HubError.transport = error else { return XCTFail("got \(error)") }
        }
        XCTAssertEqual(try client.fetchSmall(url, repo: repo).body, try contents(repoName, "tokenizer/vocab.txt"),
                       "the next request gets the whole file")
    }

    func testStalledBodyIsAbandonedAsAStall() throws {
        // Stall after some body bytes: the guard counts from the last byte, not a speed average.
        hub.setFault(.stall(afterBytes: 10, seconds: 8, times: 1), for: "\(repoName)/config.json")
        let client = HubClient(endpoint: try XCTUnwrap(HubEndpoint(hub.baseURL)), token: nil,
                               retry: RetryPolicy(attempts: 1, delays: [0]), stallTimeout: 1)
        let commit = try client.commit(of: repo, revision: "main")
        let started = Date()
        XCTAssertThrowsError(try client.fetchSmall(client.resolveURL(repo, commit: commit, path: "config.json"),
                                                   repo: repo)) { error in
            guard case HubError.transport(let transport) = error else { return XCTFail("got \(error)") }
            XCTAssertTrue(transport.isStall, "\(transport)")
            XCTAssertTrue((error as? HubError)?.isRetryable ?? false)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "gave up about 1 s after the last byte")
    }

    func testPathsWithSpacesAndUnicodeAreEncodedOnTheWire() throws {
        let path = "voices/zh é/ni hao+1.json"
        try TestHub.writeRepo(root: root, repo: repoName, files: [path: Data("{\"voice\": 1}".utf8)])
        let client = try client()
        let snapshot = try client.snapshot(of: repo, revision: "main")
        XCTAssertTrue(snapshot.files.contains { $0.path == path }, "\(snapshot.files.map(\.path))")
        let resolve = client.resolveURL(repo, commit: snapshot.commit, path: path)
        XCTAssertFalse(resolve.contains(" "), resolve)
        XCTAssertTrue(resolve.hasSuffix("/voices/zh%20%C3%A9/ni%20hao%2B1.json"), resolve)
        let location = try client.locate(repo, commit: snapshot.commit, path: path)
        XCTAssertEqual(location.size, Int64("{\"voice\": 1}".utf8.count))
        XCTAssertEqual(try client.fetchSmall(resolve, repo: repo, path: path).body, Data("{\"voice\": 1}".utf8))
    }

    // MARK: The token and the CDN

    func testTokenNeverReachesTheCDN() throws {
        hub.setGated(repoName, token: "hf_secret")
        let client = try client(token: "hf_secret")
        let commit = try client.commit(of: repo, revision: "main")
        let expected = try contents(repoName, "model.safetensors")

        let location = try client.locate(repo, commit: commit, path: "model.safetensors")
        XCTAssertFalse(location.isHubOrigin)
        XCTAssertTrue(location.url.hasPrefix(hub.cdnURL + "/"), location.url)
        XCTAssertEqual(location.etag, try sha256sum(repoName, "model.safetensors"))
        XCTAssertEqual(location.size, Int64(expected.count))
        XCTAssertEqual(location.commit, commit)

        XCTAssertTrue(client.headers(for: location.url).isEmpty, "no header for the CDN")
        let resolve = client.resolveURL(repo, commit: commit, path: "model.safetensors")
        let hubHeaders = client.headers(for: resolve)
        XCTAssertEqual(hubHeaders.count, 1)
        XCTAssertEqual(hubHeaders.first?.name, "Authorization")
        XCTAssertEqual(hubHeaders.first?.value, "Bearer hf_secret")

        let direct = try client.fetchSmall(location.url, repo: repo, path: "model.safetensors")
        XCTAssertEqual(direct.status, 200)
        XCTAssertEqual(direct.body, expected)

        let redirected = try client.fetchSmall(resolve, repo: repo, path: "model.safetensors")
        XCTAssertEqual(redirected.status, 200)
        XCTAssertEqual(redirected.body, expected)
        XCTAssertTrue(redirected.url.hasPrefix(hub.cdnURL + "/"), "the body came from the CDN: \(redirected.url)")

        XCTAssertTrue(hub.requestLog().contains { $0.hasPrefix("cdn GET /cdn/") }, "\(hub.requestLog())")
        XCTAssertTrue(hub.sawAuthorization(onCDN: false), "the Hub got the token")
        XCTAssertFalse(hub.sawAuthorization(onCDN: true), "the CDN must never see it")
    }

    func testSmallFileIsFetchedFromTheHubWithTheToken() throws {
        hub.setGated(repoName, token: "hf_secret")
        let client = try client(token: "hf_secret")
        let commit = try client.commit(of: repo, revision: "main")
        let response = try client.fetchSmall(client.resolveURL(repo, commit: commit, path: "voices/af_heart.json"),
                                             repo: repo, path: "voices/af_heart.json")
        XCTAssertEqual(response.body, try contents(repoName, "voices/af_heart.json"))
    }

    func testFetchSmallOfAMissingFileIsEntryNotFound() throws {
        let client = try client()
        let commit = try client.commit(of: repo, revision: "main")
        XCTAssertThrowsError(try client.fetchSmall(client.resolveURL(repo, commit: commit, path: "nope.json"),
                                                   repo: repo, path: "nope.json")) { error in
            guard case HubError.entryNotFound(_, let path) = error else { return XCTFail("got \(error)") }
            XCTAssertEqual(path, "nope.json")
        }
    }
}
