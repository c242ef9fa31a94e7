// FailureKind: the kind a worker or the planner records for each error it meets on a file, and
// the metric label each kind counts under: decided by the error's type, never by its words.
import Curl
@testable import Daemon
import HubClient
import HubTypes
import ModelCache
import Spool
import XCTest

final class FailureKindTests: XCTestCase {
    func testEveryErrorMetOnAFileHasTheKindOfItsTypeWhateverItsWords() throws {
        let repo = try RepoID("org/model")
        let url = "https://hub.example/org/model/resolve/0123/model.bin"  // "resolve": once counted as a network failure
        let table: [(Error, FailureKind, String)] = [
            (HubError.repoNotFound(repo), .notFound, "hub"),
            (HubError.revisionNotFound(repo, revision: "main"), .notFound, "hub"),
            (HubError.entryNotFound(repo, path: "model.bin"), .notFound, "hub"),
            (HubError.gatedRepo(repo, message: ""), .gated, "hub"),
            (HubError.http(status: 416, url: url, message: "", retryAfter: nil), .httpError, "hub"),
            (HubError.http(status: 503, url: url, message: "", retryAfter: nil), .httpError, "hub"),
            (HubError.badResponse(url: url, reason: "the server ignores Range requests"), .badAnswer, "hub"),
            (HubError.transport(TransportError(code: 35, message: "TLS handshake failed", url: url)), .transport, "network"),
            (HubError.transport(TransportError(code: 28, message: "no data", url: url, isStall: true)), .transport, "network"),
            (CacheError.checksumMismatch(path: "model.bin", expected: "a", actual: "b"), .checksumMismatch, "verification"),
            (CacheError.blobMismatch(path: "config.json", expected: "a", actual: "b"), .checksumMismatch, "verification"),
            (CacheError.sizeMismatch(path: "model.bin", expected: 2, actual: 1), .checksumMismatch, "verification"),
            (CacheError.diskFull(directory: "/m", needed: 1, available: 0, staged: "model.bin"), .diskFull, "disk"),
            (CacheError.tooLargeForDisk(path: "model.bin", size: 2, available: 1, directory: "/m"), .diskFull, "disk"),
            (CacheError.io(path: "/m/free-space/model.bin", operation: "write", errno: ENOSPC), .diskFull, "disk"),
            (CacheError.io(path: "/m/disk-free/model.bin", operation: "write", errno: EACCES), .local, "other"),
            (CacheError.unusableDirectory(path: "/m", role: "the model directory", reason: "read-only"), .local, "other"),
            (CancellationError(), .other, "other"),
        ]
        for (error, kind, label) in table {
            XCTAssertEqual(FailureKind(fetching: error), kind, "\(error)")
            XCTAssertEqual(DaemonMetrics.label(of: kind), label, "\(error)")
        }
    }

    func testEveryKindHasOneOfThePagesLabelsAndItsRecordReadsBack() {
        for kind in FailureKind.allCases {
            XCTAssertTrue(DaemonMetrics.failureLabels.contains(DaemonMetrics.label(of: kind)), "\(kind)")
            XCTAssertEqual(FailureKind(recorded: kind.rawValue), kind)
        }
        XCTAssertEqual(FailureKind(recorded: nil), .other, "a record written before kinds were recorded")
    }
}
