// CurlMulti - many concurrent transfers driven from one thread with libcurl's multi interface.
import CCurl
import Foundation

/// Drives prepared `CurlEasy` handles concurrently; connections are shared across them.
/// Not thread-safe: one thread adds handles and calls `poll`.
public final class CurlMulti: @unchecked Sendable {
    private let multi: UnsafeMutableRawPointer
    private var running: [UnsafeMutableRawPointer: CurlEasy] = [:]

    public init() {
        CurlLibrary.loaded()
        guard let m = sf_curl_multi_init() else { fatalError("libcurl could not create a multi handle") }
        multi = m
    }

    deinit {
        for (h, _) in running { sf_curl_multi_remove_handle(multi, h) }
        sf_curl_multi_cleanup(multi)
    }

    /// Starts a prepared handle.
    public func add(_ easy: CurlEasy) {
        running[easy.handle] = easy
        sf_curl_multi_add_handle(multi, easy.handle)
    }

    /// Stops a running handle without a result.
    public func remove(_ easy: CurlEasy) {
        guard running.removeValue(forKey: easy.handle) != nil else { return }
        sf_curl_multi_remove_handle(multi, easy.handle)
    }

    /// Moves every transfer forward, waiting at most `timeoutMs` for activity,
    /// and returns the transfers that finished.
    public func poll(timeoutMs: Int) -> [(CurlEasy, CurlResult)] {
        var stillRunning: Int32 = 0
        sf_curl_multi_perform(multi, &stillRunning)
        var done = collect()
        if done.isEmpty && !running.isEmpty {
            var ready: Int32 = 0
            sf_curl_multi_poll(multi, nil, 0, Int32(timeoutMs), &ready)
            sf_curl_multi_perform(multi, &stillRunning)
            done = collect()
        } else if running.isEmpty {
            usleep(UInt32(min(timeoutMs, 50)) * 1000)
        }
        return done
    }

    /// Wakes a thread blocked in `poll` (call from any thread).
    public func wakeup() { sf_curl_multi_wakeup(multi) }

    private func collect() -> [(CurlEasy, CurlResult)] {
        var done: [(CurlEasy, CurlResult)] = []
        var left: Int32 = 0
        while let msg = sf_curl_multi_info_read(multi, &left) {
            guard sf_msg_is_done(msg) != 0, let h = sf_msg_easy(msg) else { continue }
            let code = sf_msg_result(msg)
            sf_curl_multi_remove_handle(multi, h)
            if let easy = running.removeValue(forKey: h) {
                done.append((easy, easy.finish(code: code)))
            }
        }
        return done
    }
}
