// RequestSubmitTests - asking again for a request in flight (every node of a job asking for one
// model at once) looks the record up and writes nothing: no temp record made, synced, linked in
// vain and removed per node.
import Foundation
import HubTypes
import Spool
@testable import TestSupport
import XCTest

final class RequestSubmitTests: HubTestCase {
    func testAskingAgainForARequestInFlightWritesNothingInTmp() throws {
        let spool = try Spool(base: cacheBase, node: "t")
        let request = SpoolRequest(repo: "org/Asked", revision: "main", commit: String(repeating: "a", count: 40),
                                   modelDir: cacheBase.appendingPathComponent("models/org/Asked").path, files: [], node: "t")
        XCTAssertTrue(try spool.submit(request), "the first ask publishes the record")
        let tmp = spool.layout.path(.tmp)
        var before = stat()
        XCTAssertEqual(stat(tmp, &before), 0)
        usleep(20_000)
        XCTAssertFalse(try spool.submit(request), "asked again: the record was there")
        var after = stat()
        XCTAssertEqual(stat(tmp, &after), 0)
        XCTAssertEqual(after.st_mtim.tv_sec, before.st_mtim.tv_sec)
        XCTAssertEqual(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec, "no temp record made and removed in tmp/")
        XCTAssertTrue(try spool.submit(request) == false && spool.hasRequest(request.id))
    }
}
