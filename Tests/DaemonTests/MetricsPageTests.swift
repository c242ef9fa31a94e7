// MetricsPage: the Prometheus text format's escapes, in HELP texts and label values.
@testable import Daemon
import XCTest

final class MetricsPageTests: XCTestCase {
    func testLabelValuesAndHelpTextsAreEscapedAndPlainOnesKeptAsTheyAre() {
        var page = MetricsPage()
        page.add("m", type: "gauge", help: "a \\ b \"quoted\"\nnext", [([("node", "n\\1 \"x\"\ny"), ("plain", "ok-1.2")], 3)])
        XCTAssertEqual(page.text, """
            # HELP m a \\\\ b "quoted"\\nnext
            # TYPE m gauge
            m{node="n\\\\1 \\"x\\"\\ny",plain="ok-1.2"} 3

            """)
        XCTAssertEqual(MetricsPage.escape("nothing to escape: é ü"), "nothing to escape: é ü")
    }
}
