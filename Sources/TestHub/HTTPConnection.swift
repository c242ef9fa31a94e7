// HTTPConnection - serves one keep-alive connection: reads each request, books it, asks
// the listener's endpoint for an answer and writes it, sending file bodies from disk.
import Foundation
import SharedFiles

struct HTTPConnection {
    /// Request bodies larger than this are refused (the Hub's API bodies are small JSON or forms).
    private static let maxRequestBody = 16 << 20

    let socket: ConnectionSocket
    let listener: Listener
    let state: HubState
    let answer: @Sendable (HubRequest) -> HubResponse

    func serve() {
        var reader = RequestReader()
        while !state.stopSignal.isStopped {
            var request: HubRequest
            do {
                request = try reader.readHead(from: socket)
            } catch RequestReadError.malformed(let why) {
                _ = socket.send(HubResponse.text(400, why).head(keepAlive: false) + Data((why + "\n").utf8))
                return
            } catch {
                return
            }
            state.ledger.recordRequest(on: listener, method: request.method, target: request.target,
                                       hasAuthorization: request.header("Authorization") != nil)
            if let refusal = readBody(of: &request, reader: &reader) {
                _ = write(refusal, to: request, keepAlive: false)
                return
            }
            let response = answer(request)
            let keepAlive = !request.wantsClose
            if !write(response, to: request, keepAlive: keepAlive) || !keepAlive { return }
        }
    }

    /// Reads the body Content-Length announces; an answer to send instead when it cannot.
    private func readBody(of request: inout HubRequest, reader: inout RequestReader) -> HubResponse? {
        if let coding = request.header("Transfer-Encoding"), coding.lowercased() != "identity" {
            return .text(411, "chunked request bodies are not supported: send Content-Length")
        }
        guard let lengthText = request.header("Content-Length") else { return nil }
        guard let length = Int(lengthText), length >= 0 else { return .text(400, "bad Content-Length") }
        guard length <= HTTPConnection.maxRequestBody else { return .text(413, "request body too large") }
        guard length > 0 else { return nil }
        if request.header("Expect")?.lowercased() == "100-continue" {
            guard socket.send(Data("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return .text(400, "closed") }
        }
        do {
            request.body = try reader.readBody(count: length, from: socket)
            return nil
        } catch {
            return .text(400, "incomplete request body")
        }
    }

    /// Writes the answer; false when the connection must end (failed send, or a fault closed it).
    private func write(_ response: HubResponse, to request: HubRequest, keepAlive: Bool) -> Bool {
        var response = response
        // A file body's faults are taken before the head: one may change its Content-Length.
        var faults: BodyFaults?
        if request.method != "HEAD", case .file(let file) = response.body, file.length > 0 {
            faults = file.presetFaults
                ?? state.faults.bodyFaults(for: file.fileKey, covering: file.offset ..< file.offset + file.length)
            if let missing = faults?.missingBytes {
                response.headers.removeAll { $0.name.caseInsensitiveCompare("Content-Length") == .orderedSame }
                response.headers.append(("Content-Length", "\(file.length + missing)"))
            }
        }
        guard socket.send(response.head(keepAlive: keepAlive)) else { return false }
        if request.method == "HEAD" { return true }
        switch response.body {
        case .empty:
            return true
        case .bytes(let data):
            return socket.send(data)
        case .file(let file):
            return BodySender(socket: socket, state: state).send(file, faults: faults ?? BodyFaults())
        }
    }
}

/// Sends a file slice from disk in chunks with pread, applying the file's body faults and
/// booking every byte in the ledger.
struct BodySender {
    private static let chunkSize = 256 * 1024

    let socket: ConnectionSocket
    let state: HubState

    /// False when the connection must end: a fault dropped it, or the peer went away.
    func send(_ file: FileBody, faults: BodyFaults) -> Bool {
        guard file.length > 0 else { return true }
        let fd = open(file.diskPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let tally = state.ledger.beginBody(of: file.fileKey, at: file.offset, channel: file.channel)
        let limit = min(file.length, faults.dropAfter ?? file.length)
        var chunk = BodySender.chunkSize
        if let bps = faults.bytesPerSecond { chunk = max(1, min(chunk, bps / 20)) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        let started = Date()
        var stallPending = faults.stall
        var sent = 0
        while sent < limit {
            if let stall = stallPending, sent >= stall.afterBytes {
                stallPending = nil
                guard state.stopSignal.sleep(stall.seconds) else { return false }
            }
            var n = min(chunk, limit - sent)
            if let stall = stallPending { n = min(n, stall.afterBytes - sent) }
            let position = file.offset + sent
            let got = FileIO.restartingAfterSignal { pread(fd, buffer.baseAddress, n, off_t(position)) }
            guard got > 0 else { return false }
            for offset in faults.flipOffsets where offset >= position && offset < position + got {
                buffer[offset - position] ^= 0xFF
            }
            state.ledger.book(got, on: tally)
            let written = socket.send(UnsafeRawBufferPointer(rebasing: buffer[0 ..< got]))
            if written < got {
                state.ledger.book(written - got, on: tally)
                return false
            }
            sent += got
            if let bps = faults.bytesPerSecond {
                let due = Double(sent) / Double(bps) - Date().timeIntervalSince(started)
                if due > 0, !state.stopSignal.sleep(due) { return false }
            }
        }
        if faults.dropAfter != nil || faults.missingBytes != nil {
            socket.shutdown()
            return false
        }
        return true
    }
}
