// The test Hub's Xet path, driven as a Xet client drives it: the resolve's Xet headers, the token,
// reconstructions (v2, v1, Range pages, 416), xorb ranges decoded and hashed, the bridge, the
// counters and the Xet faults.
import Foundation
import TestHub
import Xet
import XCTest

final class XetServingTests: HubTestCase {
    /// What a resolve HEAD of a Xet-backed file tells a client.
    struct XetPointer {
        let hash: String
        let tokenURL: String
        let bridge: String
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        hub.setXet(Self.repo)
    }

    func pointer(_ path: String = "model.safetensors", size: Int = HubTestCase.lfsSize) throws -> XetPointer {
        let head = try client.request("HEAD", "/\(Self.repo)/resolve/main/\(path)")
        XCTAssertEqual(head.status, 302)
        let link = try XCTUnwrap(head.header("Link"))
        XCTAssertTrue(link.hasSuffix("; rel=\"xet-auth\""), link)
        let url = String(link.dropFirst().prefix { $0 != ">" })
        XCTAssertEqual(head.header("X-Linked-Size"), String(size))
        XCTAssertNotNil(head.header("X-Repo-Commit"))
        return XetPointer(hash: try XCTUnwrap(head.header("X-Xet-Hash")), tokenURL: url, bridge: try XCTUnwrap(head.header("Location")))
    }

    func token(_ pointer: XetPointer) throws -> (cas: String, token: String) {
        let answer = try RawHTTPClient.fetch(pointer.tokenURL)
        XCTAssertEqual(answer.status, 200)
        let json = try XCTUnwrap(answer.json as? [String: Any])
        let cas = try XCTUnwrap(json["casUrl"] as? String)
        let token = try XCTUnwrap(json["accessToken"] as? String)
        XCTAssertEqual(answer.header("X-Xet-Cas-Url"), cas)
        XCTAssertEqual(answer.header("X-Xet-Access-Token"), token)
        XCTAssertEqual(answer.header("X-Xet-Token-Expiration"), "\(try XCTUnwrap(json["exp"] as? Int))")
        return (cas, token)
    }

    func reconstruction(_ pointer: XetPointer, range: String? = nil, version: XetReconstruction.Version = .v2,
                        token: String? = nil) throws -> (RawResponse, XetReconstruction?) {
        let (cas, fresh) = try self.token(pointer)
        var headers = ["Authorization": "Bearer \(token ?? fresh)"]
        if let range { headers["Range"] = range }
        let answer = try RawHTTPClient.fetch("\(cas)/v\(version.rawValue)/reconstructions/\(pointer.hash)", headers: headers)
        guard answer.status == 200 else { return (answer, nil) }
        return (answer, try XetReconstruction.parse(answer.body, version: version))
    }

    /// The bytes a reconstruction names, fetched range by range and decoded; every chunk's hash too.
    func rebuild(_ recon: XetReconstruction) throws -> (bytes: Data, chunks: [MerkleLeaf]) {
        var out = Data()
        var leaves: [MerkleLeaf] = []
        for term in recon.terms {
            let fetch = try XCTUnwrap(recon.fetches[term.xorb]?.first { $0.chunks.contains(term.chunks.lowerBound) && $0.chunks.upperBound >= term.chunks.upperBound })
            let answer = try RawHTTPClient.fetch(fetch.url, headers: ["Range": "bytes=\(fetch.bytes.lowerBound)-\(fetch.bytes.upperBound)"])
            XCTAssertEqual(answer.status, 206)
            var decoder = XorbRangeDecoder(firstChunkIndex: fetch.chunks.lowerBound)
            let chunks = try decoder.feed(Array(answer.body))
            try decoder.finish()
            for chunk in chunks where term.chunks.contains(chunk.index) {
                out += chunk.bytes
                leaves.append(MerkleLeaf(hash: chunk.hash, length: UInt64(chunk.bytes.count)))
            }
        }
        return (out.dropFirst(recon.offsetIntoFirstRange), leaves)
    }

    func testAXetClientRebuildsTheFileFromReconstructionAndXorbRanges() throws {
        let pointer = try pointer()
        let (answer, recon) = try reconstruction(pointer)
        XCTAssertEqual(answer.status, 200)
        let (bytes, leaves) = try rebuild(try XCTUnwrap(recon))
        XCTAssertEqual(bytes, try self.bytes("model.safetensors"))
        XCTAssertEqual(MerkleTree.fileHash(of: leaves).hex, pointer.hash, "the Merkle root of the chunks is the X-Xet-Hash")
        XCTAssertEqual(hub.xetHash(of: Self.lfsKey), pointer.hash)
        // The tree names the same hash.
        let tree = try client.request("GET", "/api/models/\(Self.repo)/tree/main?recursive=true")
        let entry = try XCTUnwrap((tree.json as? [[String: Any]])?.first { $0["path"] as? String == "model.safetensors" })
        XCTAssertEqual(entry["xetHash"] as? String, pointer.hash)
        XCTAssertEqual(hub.reconstructions(for: Self.lfsKey), 1)
        XCTAssertEqual(hub.xorbRangeRequests(for: Self.lfsKey), recon?.terms.count)
        XCTAssertGreaterThanOrEqual(hub.xorbBytes(for: Self.lfsKey), Self.lfsSize * 99 / 100, "random bytes are stored uncompressed")
        XCTAssertEqual(hub.bridgeBytes(for: Self.lfsKey), 0)
        XCTAssertEqual(hub.bodyBytes(for: Self.lfsKey), 0)
    }

    func testReconstructionPagesBothVersionsAnd416PastTheEnd() throws {
        let pointer = try pointer()
        let file = try bytes("model.safetensors")
        for version in [XetReconstruction.Version.v2, .v1] {
            let (answer, recon) = try reconstruction(pointer, range: "bytes=1000000-1999999", version: version)
            XCTAssertEqual(answer.status, 200)
            let (bytes, _) = try rebuild(try XCTUnwrap(recon))
            XCTAssertEqual(bytes.prefix(1_000_000), file.subdata(in: 1_000_000..<2_000_000), "v\(version.rawValue)")
            XCTAssertGreaterThan(recon?.offsetIntoFirstRange ?? 0, 0)
        }
        let (past, _) = try reconstruction(pointer, range: "bytes=\(Self.lfsSize)-")
        XCTAssertEqual(past.status, 416)
        XCTAssertEqual(past.header("Content-Range"), "bytes */\(Self.lfsSize)")
    }

    func testRepeatedChunksGetOneFetchRangePerXorbThatCoversEveryTerm() throws {
        // 300,000 zeros: three chunks, the first two equal, so the file names one chunk twice.
        try TestHub.writeRepo(root: root, repo: Self.repo, files: ["zeros.bin": Data(count: 300_000)])
        let (_, recon) = try reconstruction(try pointer("zeros.bin", size: 300_000))
        let answer = try XCTUnwrap(recon)
        XCTAssertEqual(answer.terms.map(\.chunks), [0..<1, 0..<2])
        for (_, fetches) in answer.fetches {
            let sorted = fetches.map(\.chunks).sorted { $0.lowerBound < $1.lowerBound }
            XCTAssertTrue(zip(sorted, sorted.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound }, "\(sorted)")
        }
        XCTAssertEqual(try rebuild(answer).bytes, Data(count: 300_000))
    }

    func testTheCASWantsAFreshTokenAndTheTokenRouteGivesOne() throws {
        let pointer = try pointer()
        XCTAssertEqual(try reconstruction(pointer, token: "hf_hub_token_is_not_a_xet_token").0.status, 401)
        hub.xetTokenLifetime = 0
        XCTAssertEqual(try reconstruction(pointer).0.status, 401, "a token past its expiry")
        hub.xetTokenLifetime = 3600
        hub.setFault(.xetTokenExpired(times: 1), for: Self.lfsKey)
        XCTAssertEqual(try reconstruction(pointer).0.status, 401, "expired mid-file (the fault)")
        XCTAssertEqual(try reconstruction(pointer).0.status, 200, "a fresh token works again")
    }

    func testXorbURLsServeAnySubRangeAndSeveralRangesAsMultipart() throws {
        let (_, recon) = try reconstruction(try pointer())
        let fetch = try XCTUnwrap(recon?.fetches.values.first?.first)
        let whole = try RawHTTPClient.fetch(fetch.url)
        XCTAssertEqual(whole.status, 200)
        XCTAssertNil(whole.header("Content-Range"))
        let sub = try RawHTTPClient.fetch(fetch.url, headers: ["Range": "bytes=10-19"])
        XCTAssertEqual(sub.status, 206)
        XCTAssertEqual(sub.body, whole.body.subdata(in: 10..<20))
        let multi = try RawHTTPClient.fetch(fetch.url, headers: ["Range": "bytes=0-7, 100-109"])
        XCTAssertEqual(multi.status, 206)
        let type = try XCTUnwrap(multi.header("Content-Type"))
        XCTAssertTrue(type.hasPrefix("multipart/byteranges; boundary="), type)
        let text = String(decoding: multi.body, as: UTF8.self)
        XCTAssertTrue(text.contains("Content-Range: bytes 0-7/"), text.prefix(300).description)
        XCTAssertTrue(text.contains("Content-Range: bytes 100-109/"))
        XCTAssertTrue(multi.body.range(of: whole.body.subdata(in: 100..<110)) != nil)
        var tampered = fetch.url
        tampered.replaceSubrange(tampered.range(of: "sig=")!.upperBound..<tampered.index(tampered.range(of: "sig=")!.upperBound, offsetBy: 2), with: "zz")
        XCTAssertEqual(try RawHTTPClient.fetch(tampered).status, 403)
        XCTAssertEqual(try RawHTTPClient.fetch(fetch.url, headers: ["Range": "bytes=999999999-"]).status, 416)
    }

    func testThePlainResolveGoesThroughTheBridgeAndIsCountedThere() throws {
        let pointer = try pointer()
        let answer = try RawHTTPClient.fetch(pointer.bridge)
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.body, try bytes("model.safetensors"))
        XCTAssertEqual(hub.bridgeBytes(for: Self.lfsKey), Self.lfsSize)
        XCTAssertEqual(hub.xetTotals.reconstructions, 0)
    }

    func testOnlyTheSwitchedRepoIsXet() throws {
        try TestHub.generateRepo(root: root, repo: "org/plain", files: ["model.safetensors": 2_000_000])
        let plain = try client.request("HEAD", "/org/plain/resolve/main/model.safetensors")
        XCTAssertEqual(plain.status, 302)
        XCTAssertNil(plain.header("X-Xet-Hash"))
        XCTAssertTrue(try XCTUnwrap(plain.header("Location")).contains("/cdn/"))
        hub.xetEverywhere = true
        XCTAssertNotNil(try client.request("HEAD", "/org/plain/resolve/main/model.safetensors").header("X-Xet-Hash"))
        let small = try client.request("HEAD", "/\(Self.repo)/resolve/main/config.json")
        XCTAssertEqual(small.status, 200, "a file in git is never Xet")
        XCTAssertNil(small.header("X-Xet-Hash"))
    }

    func testXetFaults() throws {
        let pointer = try pointer()
        hub.setFault(.reconstructionStatus(code: 503, times: 1, retryAfter: 1), for: Self.lfsKey)
        let refused = try reconstruction(pointer).0
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.header("Retry-After"), "1")
        let recon = try XCTUnwrap(try reconstruction(pointer).1)
        let fetch = try XCTUnwrap(recon.fetches[recon.terms[0].xorb]?.first)
        let range = ["Range": "bytes=\(fetch.bytes.lowerBound)-\(fetch.bytes.upperBound)"]

        hub.setFault(.xorbStatus(code: 500, times: 1, retryAfter: nil), for: Self.lfsKey)
        XCTAssertEqual(try RawHTTPClient.fetch(fetch.url, headers: range).status, 500)
        XCTAssertEqual(try RawHTTPClient.fetch(fetch.url, headers: range).status, 206, "used up")

        hub.setFault(.xorbTruncated(missingBytes: 100, times: 1), for: Self.lfsKey)
        let short = try RawHTTPClient.fetch(fetch.url, headers: range)
        XCTAssertTrue(short.truncated)
        XCTAssertEqual(short.body.count, fetch.bytes.count - 100)

        hub.setFault(.corruptChunk(chunk: 1), for: Self.lfsKey)
        let (bytes, leaves) = try rebuild(recon)
        XCTAssertNotEqual(MerkleTree.fileHash(of: leaves).hex, pointer.hash, "the flipped chunk no longer hashes to the file's hash")
        XCTAssertEqual(bytes.count, Self.lfsSize, "random chunks are stored uncompressed: the flip changes a byte, not the length")
        XCTAssertNotEqual(bytes, try self.bytes("model.safetensors"))

        // The JSON form of every Xet fault reads back.
        let faults: [Fault] = [.reconstructionStatus(code: 502, times: 2, retryAfter: 3), .reconstructionStall(seconds: 1.5, times: 1),
                               .xorbStatus(code: 500, times: 1, retryAfter: nil), .xorbStall(afterBytes: 10, seconds: 2, times: 1),
                               .xorbTruncated(missingBytes: 5, times: 1), .xetTokenExpired(times: 1), .corruptChunk(chunk: 3)]
        for fault in faults {
            XCTAssertEqual(try JSONDecoder().decode(Fault.self, from: JSONEncoder().encode(fault)), fault)
        }
    }

    func testStallsDelayTheReconstructionAndTheXorbRangeThenFinishThem() throws {
        let pointer = try pointer()
        hub.setFault(.reconstructionStall(seconds: 0.4, times: 1), for: Self.lfsKey)
        var start = Date()
        let recon = try XCTUnwrap(try reconstruction(pointer).1)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.35)
        let fetch = try XCTUnwrap(recon.fetches[recon.terms[0].xorb]?.first)
        let whole = try RawHTTPClient.fetch(fetch.url).body
        hub.setFault(.xorbStall(afterBytes: 100, seconds: 0.4, times: 1), for: Self.lfsKey)
        start = Date()
        let stalled = try RawHTTPClient.fetch(fetch.url, headers: ["Range": "bytes=0-999"])
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.35)
        XCTAssertEqual(stalled.body, whole.prefix(1000))
    }

    func testScenarioFileSwitchesXetOnAndSetsTheTokenLifetime() throws {
        let json = """
            {"xetRepos": ["org/other"], "xetTokenLifetime": 0,
             "faults": [{"file": "org/model/model.safetensors", "type": "corruptChunk", "chunk": 2}]}
            """
        let scenario = try HubScenario.decode(Data(json.utf8))
        XCTAssertEqual(scenario.xetRepos, ["org/other"])
        XCTAssertEqual(scenario.faults.map(\.fault), [.corruptChunk(chunk: 2)])
        hub.setXet(Self.repo, false)
        scenario.apply(to: hub)
        XCTAssertNil(hub.xetHash(of: Self.lfsKey), "org/model is not switched on by the scenario")
        try TestHub.generateRepo(root: root, repo: "org/other", files: ["w.bin": 1_500_000])
        XCTAssertNotNil(hub.xetHash(of: "org/other/w.bin"))
        XCTAssertEqual(hub.xetTokenLifetime, 0)
    }
}
