// CurlEasy - one libcurl easy handle: options, callbacks and results, behind Swift types.
//
// Callbacks reach their Swift owner through CURLOPT_*DATA and Unmanaged, since C
// function pointers cannot capture context.
import CCurl
import Foundation

/// libcurl, loaded with dlopen on first use (Sources/CCurl/include/CCurl.h says why).
public enum CurlLibrary {
    /// Loads libcurl once. Every entry point that makes handles (`HTTPSession.perform`,
    /// `TransferEngine.fetch`, `RangeFetch`) calls this first, so a missing libcurl is an error
    /// the caller sees, not a crash.
    public static func load() throws {
        var reason = [CChar](repeating: 0, count: 512)
        guard sf_curl_load(&reason, reason.count) != 0 else { return }
        throw CurlUnavailable(reason: String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// libcurl's version line (`libcurl/8.14.1 OpenSSL/3.5.1 zlib/1.3.1 …`), loading it.
    public static func versionLine() throws -> String {
        try load()
        return String(cString: sf_curl_version())
    }

    /// The version line, or why libcurl cannot be loaded (`not loadable: …`): what `--version`,
    /// `speech env` and speech-fetchd's build labels print.
    @Sendable public static func versionOrReason() -> String {
        do { return try versionLine() } catch { return "not loadable: \(error)" }
    }

    /// For the handle initializers: by then `load()` has succeeded, so this only traps on a
    /// programming error (a handle made without going through an entry point).
    static func loaded() {
        do { try load() } catch { fatalError("\(error)") }
    }
}

/// libcurl could not be loaded: a broken installation, with what to install.
public struct CurlUnavailable: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public var description: String {
        "cannot load libcurl (\(reason)); install it with `apt-get install libcurl4` and try again"
    }
}

/// What to do with a response body once its status line and headers are known.
public enum BodyDisposition: Sendable {
    /// Hand every chunk to the body callback.
    case stream
    /// Keep the body in memory (error pages, JSON). A body that passes `limit` bytes ends the
    /// transfer at once: it completes as `.tooLarge` (an endless body is never drained).
    case collect(limit: Int)
    /// Stop the transfer now; it completes with `aborted == true`.
    case abort
}

/// One request on one easy handle. The handle is reused between requests (keep-alive).
public final class CurlEasy: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?

    // State of the current request, touched only by the thread driving it.
    private var request = HTTPRequest(url: "")
    private var status = 0
    private var headers = HTTPHeaders()
    private var headersDone = false
    private var disposition = BodyDisposition.collect(limit: 1 << 20)
    private var collected = Data()
    private var abortedByUs = false
    /// The collected body passed its limit: the transfer was stopped there.
    private var overLimit: Int?
    private var onResponse: (Int, HTTPHeaders) -> BodyDisposition = { _, _ in .collect(limit: 1 << 20) }
    private var onBody: (UnsafeRawBufferPointer) -> Bool = { _ in true }
    private var onTick: () -> Bool = { true }
    /// The stall guard's clock: when a byte last arrived (or the request started).
    /// When bytes last arrived, on the monotonic clock: a wall clock set back would hide a stall.
    private var lastActivity = CurlEasy.monotonicSeconds()
    private var stalled = false

    public init() {
        CurlLibrary.loaded()
        guard let h = sf_curl_easy_init() else { fatalError("libcurl could not create a handle") }
        handle = h
    }

    deinit {
        sf_curl_easy_cleanup(handle)
        if let list = headerList { sf_curl_slist_free_all(list) }
    }

    /// Prepares the handle for `request`. `onResponse` sees status and headers before any body byte;
    /// `onBody` gets each chunk when streaming and returns false to abort. `onTick` is called
    /// from libcurl's progress callback, at least once a second while the request runs, bytes
    /// arriving or not (a lease refresh that must not depend on the server sending); false aborts.
    public func prepare(_ request: HTTPRequest,
                        onResponse: @escaping (Int, HTTPHeaders) -> BodyDisposition,
                        onBody: @escaping (UnsafeRawBufferPointer) -> Bool,
                        onTick: @escaping () -> Bool = { true }) {
        sf_curl_easy_reset(handle)
        self.request = request
        self.onResponse = onResponse
        self.onBody = onBody
        self.onTick = onTick
        status = 0
        headers = HTTPHeaders()
        headersDone = false
        collected = Data()
        abortedByUs = false
        overLimit = nil
        lastActivity = CurlEasy.monotonicSeconds()
        stalled = false

        setString(CURLOPT_URL, request.url)
        setLong(CURLOPT_FOLLOWLOCATION, 0)
        // http and https only, whatever a URL or a Location names (file://, ftp://, …).
        _ = sf_easy_restrict_to_http(handle)
        setLong(CURLOPT_NOSIGNAL, 1)
        setLong(CURLOPT_TCP_KEEPALIVE, 1)
        setString(CURLOPT_USERAGENT, "speech-fetch/0.1")
        setString(CURLOPT_ACCEPT_ENCODING, "identity")
        setLong(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(request.connectTimeout * 1000)))
        // The stall guard runs in the progress callback (libcurl calls it at least once a second,
        // idle or not): no byte for `stallTimeout` seconds abandons the attempt. libcurl's own
        // low-speed check averages over several seconds, so it would fire late.
        setLong(CURLOPT_NOPROGRESS, 0)
        setLong(CURLOPT_BUFFERSIZE, request.receiveBufferSize.map { min(512 << 10, max(1 << 10, $0)) } ?? 256 * 1024)
        if request.method == .head { setLong(CURLOPT_NOBODY, 1) }
        if let r = request.range {
            setString(CURLOPT_RANGE, r.end.map { "\(r.start)-\($0)" } ?? "\(r.start)-")
        }
        if let list = headerList { sf_curl_slist_free_all(list); headerList = nil }
        for (name, value) in request.headers {
            headerList = sf_curl_slist_append(headerList, "\(name): \(value)")
        }
        if let list = headerList { _ = sf_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, list) }

        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = sf_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, me)
        _ = sf_easy_setopt_data_cb(handle, CURLOPT_HEADERFUNCTION, { ptr, size, count, user in
            let easy = Unmanaged<CurlEasy>.fromOpaque(user!).takeUnretainedValue()
            let n = size * count
            easy.headerLine(UnsafeRawBufferPointer(start: ptr, count: n))
            return n
        })
        _ = sf_easy_setopt_pointer(handle, CURLOPT_XFERINFODATA, me)
        _ = sf_easy_setopt_xferinfo_cb(handle, CURLOPT_XFERINFOFUNCTION, { user, _, _, _, _ in
            Unmanaged<CurlEasy>.fromOpaque(user!).takeUnretainedValue().progress() ? 0 : 1
        })
        _ = sf_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, me)
        _ = sf_easy_setopt_data_cb(handle, CURLOPT_WRITEFUNCTION, { ptr, size, count, user in
            let easy = Unmanaged<CurlEasy>.fromOpaque(user!).takeUnretainedValue()
            let n = size * count
            return easy.body(UnsafeRawBufferPointer(start: ptr, count: n)) ? n : sf_curl_abort_write()
        })
    }

    /// False when the attempt must be abandoned: stalled, or `onTick` says stop.
    private func progress() -> Bool {
        if checkStall() { return false }
        if onTick() { return true }
        abortedByUs = true
        return false
    }

    /// True when the attempt must be abandoned: nothing arrived for the stall timeout.
    private func checkStall() -> Bool {
        if CurlEasy.monotonicSeconds() - lastActivity < request.stallTimeout { return false }
        stalled = true
        return true
    }

    /// CLOCK_MONOTONIC in seconds (this module sits below SharedFiles' `MonotonicClock`).
    static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    private func headerLine(_ bytes: UnsafeRawBufferPointer) {
        lastActivity = CurlEasy.monotonicSeconds()
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            // A new response (e.g. after a 100 Continue): start over.
            headers = HTTPHeaders()
            headersDone = false
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        } else if line.isEmpty {
            if status >= 200 { decide() }
        } else if let colon = line.firstIndex(of: ":") {
            headers.append(name: String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                           value: String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
    }

    private func decide() {
        guard !headersDone else { return }
        headersDone = true
        disposition = onResponse(status, headers)
        if case .abort = disposition { abortedByUs = true }
    }

    private func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        lastActivity = CurlEasy.monotonicSeconds()
        if !headersDone { decide() }
        switch disposition {
        case .abort:
            abortedByUs = true
            return false
        case .collect(let limit):
            guard collected.count + bytes.count <= limit else {
                overLimit = limit
                return false
            }
            collected.append(contentsOf: bytes)
            return true
        case .stream:
            if onBody(bytes) { return true }
            abortedByUs = true
            return false
        }
    }

    /// Runs the prepared request to the end on this thread (the easy interface).
    public func performBlocking() -> CurlResult { finish(code: sf_curl_easy_perform(handle)) }

    /// Turns libcurl's completion code into a result; used by both interfaces.
    func finish(code: CURLcode) -> CurlResult {
        if !headersDone, status >= 200 { decide() }
        if let limit = overLimit { return .tooLarge(status: status, headers: headers, limit: limit) }
        if abortedByUs { return .aborted(status: status, headers: headers) }
        if stalled {
            return .transport(TransportError(code: Int(code.rawValue), message: "no data for \(request.stallTimeout) s",
                                             url: request.url, isStall: true))
        }
        if code != CURLE_OK {
            let message = String(cString: sf_curl_easy_strerror(code))
            return .transport(TransportError(code: Int(code.rawValue), message: message, url: request.url))
        }
        return .response(HTTPResponse(status: status, headers: headers, body: collected, url: request.url))
    }

    private func setLong(_ option: CURLoption, _ value: Int) { _ = sf_easy_setopt_long(handle, option, value) }
    private func setString(_ option: CURLoption, _ value: String) { _ = sf_easy_setopt_string(handle, option, value) }
}

/// How a request ended.
public enum CurlResult: Sendable {
    /// An HTTP answer; `body` holds the collected bytes (empty when streamed).
    case response(HTTPResponse)
    /// No HTTP answer.
    case transport(TransportError)
    /// Our callbacks stopped it; the status and headers seen so far.
    case aborted(status: Int, headers: HTTPHeaders)
    /// A body kept in memory passed its `limit` (`BodyDisposition.collect`): stopped there.
    case tooLarge(status: Int, headers: HTTPHeaders, limit: Int)
}

/// How many body bytes one answer may bring, by what it is. A body past its bound ends the
/// transfer at once with `BodyTooLarge` (docs/protocol.md, "Trust"): a server that never stops
/// sending is an error, never a hang.
public enum BodyLimit {
    /// An error page (4xx, 5xx): only its message is read.
    public static let errorPage = 64 << 10
    /// A redirect's body (nobody reads it; the Location header is the answer).
    public static let redirect = 64 << 10
    /// An API answer in JSON (revision, with every sibling listed).
    public static let apiJSON = 16 << 20
    /// One page of a tree listing (1,000 entries, or 50 with `expand`).
    public static let treePage = 16 << 20

    /// The bound for an answer of `status` when a successful one may bring `success` bytes.
    public static func forStatus(_ status: Int, success: Int) -> Int {
        switch status {
        case 200..<300: return success
        case 300..<400: return redirect
        default: return errorPage
        }
    }
}

/// An answer whose body passed its bound: the transfer was stopped there.
public struct BodyTooLarge: Error, Sendable, CustomStringConvertible {
    public let url: String
    public let status: Int
    public let limit: Int
    public init(url: String, status: Int, limit: Int) {
        self.url = url
        self.status = status
        self.limit = limit
    }

    /// What kind of answer it was, in the user's words.
    public var kind: String {
        switch status {
        case 200..<300: return "answer"
        case 300..<400: return "redirect"
        default: return "error page (HTTP \(status))"
        }
    }

    /// Why, without the URL.
    public var reason: String {
        "the \(kind) sent more than \(limit) bytes of body (its bound) and was stopped there; "
            + "the server or a proxy in between is misbehaving (check HF_ENDPOINT)"
    }

    public var description: String { "\(url): \(reason)" }
}
