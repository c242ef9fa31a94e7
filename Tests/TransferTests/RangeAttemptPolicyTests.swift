// Every way an attempt at a byte range can end, driven through the one range writer and the one
// attempt policy that the embedded engine and the daemon's workers share: a table of answers
// (status, headers, body, how the connection ended) and the step each must lead to.
import Curl
import Foundation
import HubClient
import HubTypes
@testable import Transfer
import XCTest

final class RangeAttemptPolicyTests: XCTestCase {
    /// Bytes 1000...1999 of a 5000-byte file.
    let start: Int64 = 1000, end: Int64 = 1999, size: Int64 = 5000
    let cdn = "http://127.0.0.1:9/cdn/org/m/abc/model.bin?sig=x"
    let hubURL = "http://127.0.0.1:8/org/m/resolve/abc/model.bin"

    /// How the answer's body ended.
    enum Ending { case clean, closed(code: Int), stalled }

    enum Answer {
        /// An HTTP answer: status, headers, body bytes sent, and how the connection ended.
        case http(Int, [(String, String)], body: Int, Ending)
        case transport(TransportError)
    }

    enum Expected {
        case complete, retry(after: Double), follow(String), locateAgain, restartAsOneStream
        case fail(String)  // a piece of the error's text
    }

    struct Row {
        let name: String
        let answer: Answer
        var fromHub = false
        var pinned: String?
        /// Attempts already used on this range before this one.
        var attemptsBefore = 0
        var bytesBefore: Int64 = 0
        let expected: Expected
    }

    var contentRange: (String, String) { ("Content-Range", "bytes \(start)-\(end)/\(size)") }

    var table: [Row] {
        let full = Int(end - start + 1)
        return [
            Row(name: "206 whole range", answer: .http(206, [contentRange], body: full, .clean), expected: .complete),
            Row(name: "200 to a Range request", answer: .http(200, [("Content-Length", "\(size)")], body: Int(size), .clean),
                expected: .restartAsOneStream),
            Row(name: "206 with a wrong Content-Range", answer: .http(206, [("Content-Range", "bytes 0-999/5000")], body: 1000, .clean),
                expected: .retry(after: 0.5)),
            Row(name: "206 without Content-Range", answer: .http(206, [], body: full, .clean), expected: .retry(after: 0.5)),
            Row(name: "206 with a wrong total", answer: .http(206, [("Content-Range", "bytes \(start)-\(end)/9999")], body: full, .clean),
                expected: .retry(after: 0.5)),
            Row(name: "changed ETag", answer: .http(206, [contentRange, ("ETag", "\"new\"")], body: full, .clean),
                pinned: "\"old\"", expected: .fail("changed on the server")),
            Row(name: "same ETag", answer: .http(206, [contentRange, ("ETag", "\"old\"")], body: full, .clean),
                pinned: "\"old\"", expected: .complete),
            Row(name: "body cut off, connection closed (curl 18)", answer: .http(206, [contentRange], body: 400, .closed(code: 18)),
                expected: .retry(after: 0.5)),
            Row(name: "body ended early without error", answer: .http(206, [contentRange], body: 400, .clean),
                expected: .retry(after: 0.5)),
            Row(name: "whole range arrived, then fewer bytes than Content-Length and a close",
                answer: .http(206, [contentRange, ("Content-Length", "\(full + 500)")], body: full, .closed(code: 18)),
                expected: .complete),
            Row(name: "rest of a resumed range arrived, then a close",
                answer: .http(206, [("Content-Range", "bytes 1600-\(end)/\(size)")], body: 400, .closed(code: 18)),
                bytesBefore: 600, expected: .complete),
            Row(name: "more bytes than the range", answer: .http(206, [contentRange], body: full + 10, .clean),
                expected: .fail("more bytes than its Content-Range")),
            Row(name: "403 from the CDN", answer: .http(403, [], body: 0, .clean), expected: .locateAgain),
            Row(name: "403 from the CDN, attempts used up", answer: .http(403, [], body: 0, .clean), attemptsBefore: 4,
                expected: .fail("keeps expiring")),
            Row(name: "403 from the Hub", answer: .http(403, [], body: 0, .clean), fromHub: true, expected: .fail("HTTP 403")),
            Row(name: "408", answer: .http(408, [], body: 0, .clean), expected: .retry(after: 0.5)),
            Row(name: "429 with Retry-After", answer: .http(429, [("Retry-After", "7")], body: 0, .clean), expected: .retry(after: 7)),
            Row(name: "429 without Retry-After", answer: .http(429, [], body: 0, .clean), expected: .retry(after: 0.5)),
            Row(name: "500", answer: .http(500, [], body: 0, .clean), expected: .retry(after: 0.5)),
            Row(name: "503 with Retry-After", answer: .http(503, [("Retry-After", "2")], body: 0, .clean), expected: .retry(after: 2)),
            Row(name: "503 with a huge Retry-After", answer: .http(503, [("Retry-After", "999999")], body: 0, .clean),
                expected: .retry(after: 300)),
            Row(name: "502 on the second attempt", answer: .http(502, [], body: 0, .clean), attemptsBefore: 1,
                expected: .retry(after: 1.5)),
            Row(name: "504, attempts used up", answer: .http(504, [], body: 0, .clean), attemptsBefore: 4, expected: .fail("HTTP 504")),
            Row(name: "stall", answer: .http(206, [contentRange], body: 300, .stalled), expected: .retry(after: 0.5)),
            Row(name: "connection reset", answer: .transport(TransportError(code: 56, message: "Connection reset by peer", url: ""))
                , expected: .retry(after: 0.5)),
            Row(name: "connection refused", answer: .transport(TransportError(code: 7, message: "Couldn't connect", url: "")),
                expected: .retry(after: 0.5)),
            Row(name: "401", answer: .http(401, [("X-Error-Code", "RepoNotFound")], body: 0, .clean), fromHub: true,
                expected: .fail("not found on the Hub")),
            Row(name: "404 EntryNotFound", answer: .http(404, [("X-Error-Code", "EntryNotFound")], body: 0, .clean), fromHub: true,
                expected: .fail("file 'model.bin' not found")),
            Row(name: "404 from the CDN", answer: .http(404, [], body: 0, .clean), expected: .fail("HTTP 404")),
            Row(name: "302", answer: .http(302, [("Location", "/elsewhere")], body: 0, .clean),
                expected: .follow("http://127.0.0.1:9/elsewhere")),
            Row(name: "302 without Location", answer: .http(302, [], body: 0, .clean), expected: .retry(after: 0.5)),
        ]
    }

    func testEveryOutcomeLeadsToItsOneStep() {
        let policy = RangeAttemptPolicy(retry: RetryPolicy(attempts: 5, delays: [0.5, 1.5]), canRestartAsOneStream: true)
        for row in table {
            let decision = run(row, policy)
            check(decision, row.expected, row.name)
        }
    }

    func testAWorkerCannotRestartAsOneStreamAndSaysWhatToDo() {
        let policy = RangeAttemptPolicy(retry: RetryPolicy(attempts: 5, delays: [0.5]), canRestartAsOneStream: false)
        let row = table.first { $0.name == "200 to a Range request" }!
        check(run(row, policy), .fail("without a daemon"), row.name)
    }

    func testRedirectsAreNotAttemptsButAreCapped() {
        let policy = RangeAttemptPolicy(retry: RetryPolicy(attempts: 2, delays: [0]), canRestartAsOneStream: true)
        let writer = RangeWriter(start: start, end: end, fileSize: size, into: MemorySink(), pin: EtagPin())
        var count = RangeAttemptCount()
        let headers = HTTPHeaders([("Location", "http://127.0.0.1:9/next")])
        for i in 1...11 {
            writer.beginAttempt()
            XCTAssertEqual(writer.accept(status: 302, headers: headers, url: cdn, ranged: true, isHubOrigin: false).isAbort, true)
            let decision = policy.decide(.aborted(status: 302, headers: headers), writer: writer, count: &count, context: context(cdn))
            check(decision, i <= 10 ? .follow("http://127.0.0.1:9/next") : .fail("too many redirects"), "redirect \(i)")
        }
        XCTAssertEqual(count.attempts, 0)
    }

    /// A range of an https endpoint's file redirected to plain http is refused (a downgrade would
    /// send the request in clear text); an http endpoint's may go to http, and any endpoint's may
    /// go to https. Other schemes are never followed.
    func testARedirectFromHttpsToHttpIsRefusedUnlessTheEndpointIsHttp() throws {
        let secureCDN = "https://cdn.example/org/m/abc/model.bin?sig=x"
        let cases: [(endpoint: String, from: String, to: String, expected: Expected)] = [
            ("https://hub.example", secureCDN, "http://cdn.example/plain", .fail("a downgrade is followed only when HF_ENDPOINT itself is http")),
            ("https://hub.example", secureCDN, "https://other.example/next", .follow("https://other.example/next")),
            ("http://127.0.0.1:8", cdn, "http://127.0.0.1:9/next", .follow("http://127.0.0.1:9/next")),
            ("http://127.0.0.1:8", secureCDN, "http://127.0.0.1:9/next", .follow("http://127.0.0.1:9/next")),
            ("https://hub.example", secureCDN, "file:///etc/passwd", .fail("only http and https are followed")),
        ]
        for (endpoint, from, to, expected) in cases {
            let policy = RangeAttemptPolicy(retry: RetryPolicy(attempts: 2, delays: [0]), endpoint: try XCTUnwrap(HubEndpoint(endpoint)),
                                            canRestartAsOneStream: true)
            let writer = RangeWriter(start: start, end: end, fileSize: size, into: MemorySink(), pin: EtagPin())
            var count = RangeAttemptCount()
            let headers = HTTPHeaders([("Location", to)])
            writer.beginAttempt()
            XCTAssertEqual(writer.accept(status: 302, headers: headers, url: from, ranged: true, isHubOrigin: false).isAbort, true)
            let decision = policy.decide(.aborted(status: 302, headers: headers), writer: writer, count: &count, context: context(from))
            check(decision, expected, "\(endpoint): \(from) -> \(to)")
        }
        // The Hub client's own redirects (revision, tree, resolve) follow the same rule.
        let https = try XCTUnwrap(HubEndpoint("https://hub.example"))
        XCTAssertThrowsError(try HubClient.checkRedirect(from: "https://hub.example/api/x", to: "http://hub.example/api/x", endpoint: https)) {
            XCTAssertTrue("\($0)".contains("from https to plain http"), "\($0)")
        }
        XCTAssertNoThrow(try HubClient.checkRedirect(from: "http://127.0.0.1:8/api/x", to: "http://127.0.0.1:9/api/x",
                                                     endpoint: HubEndpoint("http://127.0.0.1:8")))
    }

    func testARetryResumesAtTheFirstMissingByte() {
        let sink = MemorySink()
        let writer = RangeWriter(start: start, end: end, fileSize: size, into: sink, pin: EtagPin())
        writer.beginAttempt()
        XCTAssertEqual(writer.accept(status: 206, headers: HTTPHeaders([contentRange]), url: cdn, ranged: true, isHubOrigin: false).isStream, true)
        XCTAssertTrue(feed(writer, count: 250))
        XCTAssertEqual(writer.next, start + 250)
        // The next attempt asks for 1250-1999 and must get exactly that back.
        writer.beginAttempt()
        let stale = HTTPHeaders([("Content-Range", "bytes \(start)-\(end)/\(size)")])
        XCTAssertEqual(writer.accept(status: 206, headers: stale, url: cdn, ranged: true, isHubOrigin: false).isAbort, true,
                       "a 206 for the whole range again is refused: it would be written at the wrong offset")
        writer.beginAttempt()
        let right = HTTPHeaders([("Content-Range", "bytes \(start + 250)-\(end)/\(size)")])
        XCTAssertEqual(writer.accept(status: 206, headers: right, url: cdn, ranged: true, isHubOrigin: false).isStream, true)
        XCTAssertTrue(feed(writer, count: 750))
        XCTAssertTrue(writer.isComplete)
        XCTAssertEqual(sink.writes.map(\.lowerBound).first, start)
        XCTAssertEqual(sink.writes.reduce(0) { $0 + $1.count }, 1000)
        XCTAssertTrue(zip(sink.writes, sink.writes.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound },
                      "each byte written once, in order: \(sink.writes)")
    }

    // MARK: Driving one row

    private func context(_ url: String) -> RangeContext {
        RangeContext(repo: try! RepoID("org/m"), commit: "abc", path: "model.bin", url: url)
    }

    private func run(_ row: Row, _ policy: RangeAttemptPolicy) -> RangeDecision {
        let url = row.fromHub ? hubURL : cdn
        let writer = RangeWriter(start: start, end: end, fileSize: size, into: MemorySink(), pin: EtagPin(row.pinned))
        if row.bytesBefore > 0 {
            writer.beginAttempt()
            _ = writer.accept(status: 206, headers: HTTPHeaders([contentRange]), url: url, ranged: true, isHubOrigin: row.fromHub)
            XCTAssertTrue(feed(writer, count: Int(row.bytesBefore)))
        }
        var count = RangeAttemptCount(attempts: row.attemptsBefore, redirects: 0)
        writer.beginAttempt()
        let result: CurlResult
        switch row.answer {
        case .transport(let error):
            result = .transport(error)
        case .http(let status, let fields, let body, let ending):
            let headers = HTTPHeaders(fields.map { (name: $0.0, value: $0.1) })
            switch writer.accept(status: status, headers: headers, url: url, ranged: true, isHubOrigin: row.fromHub) {
            case .abort:
                result = .aborted(status: status, headers: headers)
            case .collect:
                result = .response(HTTPResponse(status: status, headers: headers, body: Data(), url: url))
            case .stream:
                if !feed(writer, count: body) {
                    result = .aborted(status: status, headers: headers)
                } else {
                    switch ending {
                    case .clean: result = .response(HTTPResponse(status: status, headers: headers, body: Data(), url: url))
                    case .closed(let code): result = .transport(TransportError(code: code, message: "closed", url: url))
                    case .stalled: result = .transport(TransportError(code: 42, message: "stalled", url: url, isStall: true))
                    }
                }
            }
        }
        return policy.decide(result, writer: writer, count: &count, context: context(url))
    }

    /// Hands `count` bytes to the writer in chunks of at most 256, as libcurl would.
    private func feed(_ writer: RangeWriter, count: Int) -> Bool {
        let bytes = [UInt8](repeating: 7, count: count)
        return bytes.withUnsafeBytes { all in
            var at = 0
            while at < count {
                let n = min(256, count - at)
                if !writer.write(UnsafeRawBufferPointer(rebasing: all[at..<at + n])) { return false }
                at += n
            }
            return true
        }
    }

    private func check(_ decision: RangeDecision, _ expected: Expected, _ name: String,
                       file: StaticString = #filePath, line: UInt = #line) {
        switch (decision, expected) {
        case (.complete, .complete), (.locateAgain, .locateAgain), (.restartAsOneStream, .restartAsOneStream):
            return
        case (.retry(let delay, _), .retry(let after)):
            XCTAssertEqual(delay, after, accuracy: 1e-9, "\(name): delay", file: file, line: line)
        case (.follow(let got), .follow(let want)):
            XCTAssertEqual(got, want, name, file: file, line: line)
        case (.fail(let error), .fail(let text)):
            XCTAssertTrue("\(error)".contains(text), "\(name): '\(error)' should say '\(text)'", file: file, line: line)
        default:
            XCTFail("\(name): got \(decision), expected \(expected)", file: file, line: line)
        }
    }
}

/// Records where a writer put its bytes.
private final class MemorySink: RangeSink {
    var writes: [Range<Int64>] = []

    func write(_ bytes: UnsafeRawBufferPointer, at fileOffset: Int64) throws {
        writes.append(fileOffset ..< fileOffset + Int64(bytes.count))
    }
}

private extension BodyDisposition {
    var isAbort: Bool { if case .abort = self { return true } else { return false } }
    var isStream: Bool { if case .stream = self { return true } else { return false } }
}
