// TmpfsMount - a small tmpfs for tests of a full disk or a read-only mount.
import Foundation

/// Mounts and unmounts a tmpfs with mount(8) (tests run as root on the CI machine).
enum TmpfsMount {
    static func mount(_ path: String, options: String) -> Bool {
        run("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", path]) == 0
    }

    static func unmount(_ path: String) {
        if run("/bin/umount", [path]) != 0 { _ = run("/bin/umount", ["-l", path]) }
    }

    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }
}
