// NextLinkTests - following the tree listing's `Link: <...>; rel="next"` header.
import HubClient
import XCTest

final class NextLinkTests: XCTestCase {
    func testAbsoluteNextLinkIsReturned() {
        XCTAssertEqual(HubClient.nextLink("<https://h/x?cursor=2>; rel=\"next\"", relativeTo: "https://h/x"),
                       "https://h/x?cursor=2")
    }

    func testRelativeNextLinkIsMadeAbsoluteAgainstTheRequestURL() {
        let base = "http://127.0.0.1:9000/api/models/o/n/tree/abc?recursive=true"
        XCTAssertEqual(HubClient.nextLink("</api/models/o/n/tree/abc?recursive=true&cursor=Zm9v>; rel=\"next\"",
                                          relativeTo: base),
                       "http://127.0.0.1:9000/api/models/o/n/tree/abc?recursive=true&cursor=Zm9v")
    }

    func testNextIsPickedAmongSeveralLinks() {
        let header = "<https://h/x?page=1>; rel=\"prev\", <https://h/x?page=3>; rel=\"next\", <https://h/x?page=9>; rel=\"last\""
        XCTAssertEqual(HubClient.nextLink(header, relativeTo: "https://h/x?page=2"), "https://h/x?page=3")
    }

    func testUnquotedRelAndSpacingAreTolerated() {
        XCTAssertEqual(HubClient.nextLink("<https://h/x?c=2>;rel=next", relativeTo: "https://h/x"), "https://h/x?c=2")
        XCTAssertEqual(HubClient.nextLink("<https://h/x?c=2> ; rel = \"next\"", relativeTo: "https://h/x"), "https://h/x?c=2")
    }

    func testCommaInsideTheNextURLDoesNotBreakParsing() {
        // RFC 8288: a URI-reference between <> may contain commas; only ", <" separates links.
        XCTAssertEqual(HubClient.nextLink("<https://h/x?expand=a,b&cursor=2>; rel=\"next\"", relativeTo: "https://h/x"),
                       "https://h/x?expand=a,b&cursor=2")
    }

    func testNoNextLinkMeansTheLastPage() {
        XCTAssertNil(HubClient.nextLink(nil, relativeTo: "https://h/x"))
        XCTAssertNil(HubClient.nextLink("", relativeTo: "https://h/x"))
        XCTAssertNil(HubClient.nextLink("<https://h/x?page=1>; rel=\"prev\"", relativeTo: "https://h/x"))
        XCTAssertNil(HubClient.nextLink("<https://h/x?page=1>; rel=\"nextish\"", relativeTo: "https://h/x"))
    }
}
