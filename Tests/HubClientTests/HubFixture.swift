// HubFixture - a running TestHub over a temp folder, clients pointed at it, and helpers.
import Foundation
import HubClient
import TestHub
import XCTest

class HubTestCase: XCTestCase {
    var root: URL!
    var hub: TestHub!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("hubclient-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        hub = try TestHub(root: root)
    }

    override func tearDown() {
        hub?.stop()
        hub = nil
        if let root { try? FileManager.default.removeItem(at: root) }
        root = nil
    }

    /// A client of the test hub; one attempt, no waiting, unless told otherwise.
    func client(token: String? = nil, retry: RetryPolicy = RetryPolicy(attempts: 1, delays: [0])) throws -> HubClient {
        HubClient(endpoint: try XCTUnwrap(HubEndpoint(hub.baseURL)), token: token, retry: retry)
    }

    /// The bytes of a repo file as the hub serves them from disk.
    func contents(_ repo: String, _ path: String) throws -> Data {
        try Data(contentsOf: root.appendingPathComponent(repo).appendingPathComponent(path))
    }

    /// SHA-256 of a repo file computed independently of the code under test (coreutils' sha256sum).
    func sha256sum(_ repo: String, _ path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sha256sum", root.appendingPathComponent(repo).appendingPathComponent(path).path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        let hex = String(decoding: output, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
        XCTAssertEqual(hex.count, 64, "sha256sum printed \(hex)")
        return hex
    }

    /// A loopback port nothing listens on: bound to get a free number, then closed.
    func closedPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic -> Bool in
                bind(fd, generic, length) == 0 && getsockname(fd, generic, &length) == 0
            }
        }
        guard bound else { throw XCTSkip("cannot bind a loopback socket") }
        return UInt16(bigEndian: address.sin_port)
    }

    static func isCommitID(_ text: String) -> Bool {
        text.count == 40 && text.allSatisfy { "0123456789abcdef".contains($0) }
    }
}
