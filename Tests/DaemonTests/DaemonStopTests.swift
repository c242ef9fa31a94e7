// DaemonStopTests - `speech stop` leaves a daemon that a systemd unit runs to systemd: the unit
// is read from the process's cgroup (the end-to-end stop is SpeechCLITests' DaemonCommandLineTests).
@testable import Daemon
import XCTest

final class DaemonStopTests: XCTestCase {
    func testStopKnowsADaemonThatSystemdRuns() {
        let cases: [(String, String?, Bool)] = [
            ("0::/system.slice/speech-fetchd.service\n", "speech-fetchd.service", false),
            ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/speech-fetchd.service\n", "speech-fetchd.service", true),
            ("0::/user.slice/user-1000.slice/session-3.scope\n", nil, false),
            ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-1.scope\n", nil, false),
            ("12:pids:/\n1:name=systemd:/system.slice/speech-fetchd.service\n0::/\n", "speech-fetchd.service", false),
            ("1:name=systemd:/system.slice/speech-fetchd.service\n", "speech-fetchd.service", false),
            ("0::/\n", nil, false),
            ("", nil, false),
        ]
        for (cgroup, unit, user) in cases {
            let found = DaemonStop.systemdUnit(cgroup: cgroup)
            XCTAssertEqual(found?.unit, unit, cgroup)
            if unit != nil { XCTAssertEqual(found?.userManager, user, cgroup) }
        }
    }
}
