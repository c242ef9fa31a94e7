// HTTPSession - blocking requests over a small pool of reused easy handles (keep-alive).
import CCurl
import Foundation

/// Runs one request at a time per call, reusing connections between calls.
/// Safe to share between threads: each call borrows its own handle.
public final class HTTPSession: @unchecked Sendable {
    private let lock = NSLock()
    private var idle: [CurlEasy] = []

    public init() {}

    /// Performs `request` and returns the answer with its body in memory: up to `bodyLimit`
    /// bytes for a success, `BodyLimit.redirect` for a redirect, `BodyLimit.errorPage` for an error.
    /// Throws `TransportError` when no HTTP answer came, `BodyTooLarge` when a body passed its
    /// bound (the transfer stops there), `CurlUnavailable` without libcurl.
    public func perform(_ request: HTTPRequest, bodyLimit: Int) throws -> HTTPResponse {
        try CurlLibrary.load()
        let easy = borrow()
        defer { giveBack(easy) }
        easy.prepare(request, onResponse: { status, _ in .collect(limit: BodyLimit.forStatus(status, success: bodyLimit)) },
                     onBody: { _ in true })
        switch easy.performBlocking() {
        case .response(let response): return response
        case .transport(let error): throw error
        case .tooLarge(let status, _, let limit):
            throw BodyTooLarge(url: request.url, status: status, limit: limit)
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
