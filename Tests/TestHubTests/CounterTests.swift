// Counters: requests, body bytes and served ranges are exact, per file.
import Foundation
import TestHub
import XCTest

final class CounterTests: HubTestCase {
    func testRangesAreBookedExactlyOnce() throws {
        let location = try cdnLocation()
        let chunk = 1 << 20
        var start = 0
        let cdn = try RawHTTPClient(hub.cdnURL)
        while start < Self.lfsSize {
            let end = min(start + chunk, Self.lfsSize) - 1
            let r = try cdn.request("GET", target(of: location), headers: ["Range": "bytes=\(start)-\(end)"])
            XCTAssertEqual(r.status, 206)
            start = end + 1
        }
        let ranges = hub.servedRanges(for: Self.lfsKey)
        XCTAssertEqual(ranges, [0 ..< chunk, chunk ..< 2 * chunk, 2 * chunk ..< 3 * chunk, 3 * chunk ..< Self.lfsSize])
        XCTAssertEqual(hub.bodyBytes(for: Self.lfsKey), Self.lfsSize)
        XCTAssertEqual(hub.requests(for: Self.lfsKey), 5, "one resolve HEAD and four CDN GETs")
    }

    func testParallelRangesOnManyConnectionsAreEachBookedOnce() throws {
        let location = try cdnLocation()
        let path = target(of: location)
        let cdnURL = hub.cdnURL
        let part = Self.lfsSize / 32 + 1
        let data = try bytes("model.safetensors")
        let results = Seen()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            guard let cdn = try? RawHTTPClient(cdnURL) else { return }
            for i in stride(from: worker, to: 32, by: 8) {
                let start = i * part
                let end = min(start + part, Self.lfsSize) - 1
                guard let r = try? cdn.request("GET", path, headers: ["Range": "bytes=\(start)-\(end)"]) else { continue }
                results.add(r.body == data.subdata(in: start ..< end + 1) ? "ok" : "bad \(i)")
            }
        }
        XCTAssertEqual(results.lines, Array(repeating: "ok", count: 32))
        XCTAssertEqual(hub.bodyBytes(for: Self.lfsKey), Self.lfsSize)
        let ranges = hub.servedRanges(for: Self.lfsKey).sorted { $0.lowerBound < $1.lowerBound }
        XCTAssertEqual(ranges.count, 32)
        XCTAssertEqual(ranges.first?.lowerBound, 0)
        XCTAssertEqual(ranges.last?.upperBound, Self.lfsSize)
        XCTAssertTrue(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        XCTAssertEqual(hub.requests(for: Self.lfsKey), 33)
    }

    func testResolveOfASmallFileCountsItsRequestsAndBytes() throws {
        _ = try client.request("HEAD", "/org/model/resolve/main/config.json")
        _ = try client.request("GET", "/org/model/resolve/main/config.json")
        XCTAssertEqual(hub.requests(for: "org/model/config.json"), 2)
        XCTAssertEqual(hub.bodyBytes(for: "org/model/config.json"), Self.config.count)
        XCTAssertEqual(hub.servedRanges(for: "org/model/config.json"), [0 ..< Self.config.count])
    }

    func testRequestLogNamesListenerMethodAndTarget() throws {
        _ = try client.request("GET", "/api/models/org/model/revision/main?blobs=true")
        let location = try cdnLocation()
        _ = try RawHTTPClient.fetch(location, method: "HEAD")
        XCTAssertEqual(hub.requestLog(), [
            "hub GET /api/models/org/model/revision/main?blobs=true",
            "hub HEAD /org/model/resolve/main/model.safetensors",
            "cdn HEAD \(target(of: location))",
        ])
        XCTAssertEqual(hub.totalRequests, 3)
        XCTAssertEqual(hub.bodyBytes(for: Self.lfsKey), 0, "HEAD sends no body")
    }

    func testResetCountersStartsFromZero() throws {
        _ = try RawHTTPClient.fetch(try cdnLocation())
        hub.resetCounters()
        XCTAssertEqual(hub.totalRequests, 0)
        XCTAssertEqual(hub.requests(for: Self.lfsKey), 0)
        XCTAssertEqual(hub.bodyBytes(for: Self.lfsKey), 0)
        XCTAssertEqual(hub.servedRanges(for: Self.lfsKey), [])
        XCTAssertEqual(hub.requestLog(), [])
    }

    func testObserverSeesEachRequestLine() throws {
        let seen = Seen()
        hub.observeRequests { line, auth in seen.add("\(line) \(auth)") }
        _ = try client.request("GET", "/api/models/org/model", headers: ["Authorization": "Bearer t"])
        XCTAssertEqual(seen.lines, ["hub GET /api/models/org/model true"])
    }
}

private final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func add(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}
