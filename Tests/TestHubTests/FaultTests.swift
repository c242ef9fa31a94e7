// Faults on a file's body endpoints, and the scenario file that sets them.
import Foundation
import TestHub
import XCTest

final class FaultTests: HubTestCase {
    func testDropConnectionCutsTheNextBodiesThenServesWhole() throws {
        hub.setFault(.dropConnection(afterBytes: 1000, times: 1), for: Self.lfsKey)
        let location = try cdnLocation()
        let cut = try RawHTTPClient.fetch(location)
        XCTAssertEqual(cut.status, 200)
        XCTAssertTrue(cut.truncated)
        XCTAssertEqual(cut.body, try bytes("model.safetensors").prefix(1000))
        let whole = try RawHTTPClient.fetch(location)
        XCTAssertFalse(whole.truncated)
        XCTAssertEqual(whole.body.count, Self.lfsSize)
        XCTAssertEqual(hub.servedRanges(for: Self.lfsKey), [0 ..< 1000, 0 ..< Self.lfsSize])
    }

    func testTruncateBodySendsTheWholeRangeButAnnouncesMoreThenCloses() throws {
        hub.setFault(.truncateBody(missingBytes: 100, times: 1), for: Self.lfsKey)
        let location = try cdnLocation()
        let cut = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=500-999"])
        XCTAssertEqual(cut.status, 206)
        XCTAssertEqual(cut.header("Content-Length"), "600", "Content-Length promises 100 bytes more than the range")
        XCTAssertEqual(cut.header("Content-Range"), "bytes 500-999/\(Self.lfsSize)")
        XCTAssertTrue(cut.truncated)
        XCTAssertEqual(cut.body, try bytes("model.safetensors").subdata(in: 500 ..< 1000))
        let whole = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=500-999"])
        XCTAssertFalse(whole.truncated, "used up after one response")
        XCTAssertEqual(whole.header("Content-Length"), "500")
    }

    func testDropConnectionCountsBytesOfThisResponseNotOfTheFile() throws {
        hub.setFault(.dropConnection(afterBytes: 10, times: 1), for: Self.lfsKey)
        let r = try RawHTTPClient.fetch(try cdnLocation(), headers: ["Range": "bytes=500-"])
        XCTAssertEqual(r.status, 206)
        XCTAssertTrue(r.truncated)
        XCTAssertEqual(r.body, try bytes("model.safetensors").subdata(in: 500 ..< 510))
        XCTAssertEqual(hub.servedRanges(for: Self.lfsKey), [500 ..< 510])
    }

    func testFlipByteCorruptsOnlyThatOffsetInEveryResponseCoveringIt() throws {
        hub.setFault(.flipByte(offset: 12345), for: Self.lfsKey)
        let data = try bytes("model.safetensors")
        let location = try cdnLocation()
        let whole = try RawHTTPClient.fetch(location).body
        XCTAssertEqual(whole.count, data.count)
        XCTAssertEqual(whole[12345], data[12345] ^ 0xFF)
        var repaired = whole
        repaired[12345] ^= 0xFF
        XCTAssertEqual(repaired, data)
        let part = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=12340-12349"]).body
        XCTAssertEqual(part[5], data[12345] ^ 0xFF)
        let other = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=0-99"]).body
        XCTAssertEqual(other, data.prefix(100))
    }

    func testCountedFlipByteIsUsedOnlyByResponsesCoveringItsOffset() throws {
        hub.setFault(.flipByte(offset: 12345, times: 1), for: Self.lfsKey)
        let data = try bytes("model.safetensors")
        let location = try cdnLocation()
        let other = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=0-99"]).body
        XCTAssertEqual(other, data.prefix(100), "a body without the offset is clean and uses nothing")
        let flipped = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=12340-12349"]).body
        XCTAssertEqual(flipped[5], data[12345] ^ 0xFF)
        let again = try RawHTTPClient.fetch(location, headers: ["Range": "bytes=12340-12349"]).body
        XCTAssertEqual(again, data.subdata(in: 12340 ..< 12350), "used up by the one body that covered it")
    }

    func testStatusFaultAnswersTheCodeWithRetryAfterThenRecovers() throws {
        hub.setFault(.status(code: 503, times: 2, retryAfter: 7), for: Self.lfsKey)
        let location = try cdnLocation()
        for _ in 0 ..< 2 {
            let r = try RawHTTPClient.fetch(location)
            XCTAssertEqual(r.status, 503)
            XCTAssertEqual(r.header("Retry-After"), "7")
        }
        XCTAssertEqual(try RawHTTPClient.fetch(location).status, 200)
    }

    func testStatusFaultOnASmallFileHitsResolve() throws {
        hub.setFault(.status(code: 429, times: 1, retryAfter: nil), for: "org/model/config.json")
        let r = try client.request("GET", "/org/model/resolve/main/config.json")
        XCTAssertEqual(r.status, 429)
        XCTAssertNil(r.header("Retry-After"))
        XCTAssertEqual(try client.request("GET", "/org/model/resolve/main/config.json").body, Self.config)
    }

    func testIgnoreRangeAnswersTheWholeBody() throws {
        hub.setFault(.ignoreRange, for: Self.lfsKey)
        let r = try RawHTTPClient.fetch(try cdnLocation(), headers: ["Range": "bytes=10-19"])
        XCTAssertEqual(r.status, 200)
        XCTAssertNil(r.header("Content-Range"))
        XCTAssertEqual(r.body, try bytes("model.safetensors"))
    }

    func testCDNExpiredAnswers403OnTheCDNOnly() throws {
        hub.setFault(.cdnExpired(times: 1), for: Self.lfsKey)
        let location = try cdnLocation()
        XCTAssertEqual(try RawHTTPClient.fetch(location).status, 403)
        XCTAssertEqual(try RawHTTPClient.fetch(location).status, 200)
    }

    func testStallPausesTheBodyThenFinishesIt() throws {
        hub.setFault(.stall(afterBytes: 100, seconds: 0.4, times: 1), for: Self.lfsKey)
        let start = Date()
        let r = try RawHTTPClient.fetch(try cdnLocation(), headers: ["Range": "bytes=0-999"])
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.35)
        XCTAssertEqual(r.body, try bytes("model.safetensors").prefix(1000))
    }

    func testRateLimitPacesTheBody() throws {
        hub.setFault(.rateLimit(bytesPerSecond: 1_000_000), for: Self.lfsKey)
        let start = Date()
        let r = try RawHTTPClient.fetch(try cdnLocation(), headers: ["Range": "bytes=0-299999"])
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.25)
        XCTAssertEqual(r.body.count, 300_000)
    }

    func testClearFaultsRemovesEveryFault() throws {
        hub.setFault(.status(code: 500, times: 5, retryAfter: nil), for: Self.lfsKey)
        hub.setFault(.ignoreRange, for: Self.lfsKey)
        hub.clearFaults()
        XCTAssertEqual(try RawHTTPClient.fetch(try cdnLocation(), headers: ["Range": "bytes=0-0"]).status, 206)
    }

    func testStopWakesAStalledResponse() throws {
        hub.setFault(.stall(afterBytes: 0, seconds: 60, times: 1), for: Self.lfsKey)
        let location = try cdnLocation()
        let hub = self.hub!
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { hub.stop() }
        let start = Date()
        let r = try? RawHTTPClient.fetch(location)
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
        XCTAssertTrue(r?.truncated ?? true)
    }

    func testScenarioFileSetsFaultsAndAccess() throws {
        let json = """
            {"faults": [
               {"file": "org/model/model.safetensors", "type": "status", "code": 500, "times": 1, "retryAfter": 2},
               {"file": "org/model/config.json", "type": "flipByte", "offset": 0},
               {"file": "org/model/model.safetensors", "type": "dropConnection", "afterBytes": 5}
             ],
             "gated": {"gate/keeper": "hf_x"},
             "lfsOidPrefix": true, "treePageSize": 3}
            """
        let scenario = try HubScenario.decode(Data(json.utf8))
        XCTAssertEqual(scenario.faults.map(\.fault), [
            .status(code: 500, times: 1, retryAfter: 2), .flipByte(offset: 0), .dropConnection(afterBytes: 5, times: 1),
        ])
        scenario.apply(to: hub)
        XCTAssertEqual(hub.treePageSize, 3)
        XCTAssertTrue(hub.lfsOidPrefix)
        XCTAssertEqual(try RawHTTPClient.fetch(try cdnLocation()).status, 500)
        let roundTrip = try HubScenario.decode(try JSONEncoder().encode(scenario))
        XCTAssertEqual(roundTrip, scenario)
    }

    func testEveryFaultRoundTripsThroughJSON() throws {
        let faults: [Fault] = [
            .dropConnection(afterBytes: 1, times: 2), .stall(afterBytes: 3, seconds: 1.5, times: 4), .flipByte(offset: 5),
            .status(code: 503, times: 6, retryAfter: nil), .status(code: 429, times: 1, retryAfter: 9), .ignoreRange,
            .rateLimit(bytesPerSecond: 1024), .cdnExpired(times: 7), .truncateBody(missingBytes: 8, times: 2),
        ]
        XCTAssertEqual(try JSONDecoder().decode([Fault].self, from: try JSONEncoder().encode(faults)), faults)
    }
}
