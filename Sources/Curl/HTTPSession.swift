// HTTPSession - blocking requests over a small pool of reused easy handles (keep-alive).
import CCurl
import Foundation

/// Runs one request at a time per call, reusing connections between calls.
/// Safe to share between threads: each call borrows its own handle.
public final class HTTPSession: @unchecked Sendable {
    private let lock = NSLock()
    private var idle: [CurlEasy] = []

    public init() {}

    /// Performs `request` and returns the answer with up to `bodyLimit` bytes of body in memory.
    /// Throws `TransportError` when no HTTP answer came, `CurlUnavailable` without libcurl.
    public func perform(_ request: HTTPRequest, bodyLimit: Int = 64 << 20) throws -> HTTPResponse {
        try CurlLibrary.load()
        let easy = borrow()
        defer { giveBack(easy) }
        easy.prepare(request, onResponse: { _, _ in .collect(limit: bodyLimit) }, onBody: { _ in true })
        switch easy.performBlocking() {
        case .response(let response): return response
        case .transport(let error): throw error
        case .aborted(let status, let headers):
            return HTTPResponse(status: status, headers: headers, body: Data(), url: request.url)
        }
    }

    private func borrow() -> CurlEasy {
        lock.lock()
        defer { lock.unlock() }
        return idle.popLast() ?? CurlEasy()
    }

    private func giveBack(_ easy: CurlEasy) {
        lock.lock()
        defer { lock.unlock() }
        if idle.count < 8 { idle.append(easy) }
    }
}
