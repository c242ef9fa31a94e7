// EnvironmentFlag: one rule for every yes/no environment variable.
import ByteUnits
import XCTest

final class EnvironmentFlagTests: XCTestCase {
    func testASwitchIsOnOffOrLeftToItsDefault() {
        for on in ["1", "true", "TRUE", "Yes", "on", " 1 "] { XCTAssertEqual(EnvironmentFlag.value("X", in: ["X": on]), true, "'\(on)'") }
        for off in ["0", "false", "No", "OFF"] { XCTAssertEqual(EnvironmentFlag.value("X", in: ["X": off]), false, "'\(off)'") }
        for other in ["", "2", "enabled", "y"] { XCTAssertNil(EnvironmentFlag.value("X", in: ["X": other]), "'\(other)'") }
        XCTAssertNil(EnvironmentFlag.value("X", in: [:]))
        XCTAssertTrue(EnvironmentFlag.isOn("X", in: ["X": "yes"]))
        XCTAssertFalse(EnvironmentFlag.isOn("X", in: ["X": "maybe"]))
    }
}
