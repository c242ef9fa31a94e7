// FileResponder - the answer of a file's body endpoint (resolve of a small file, or the
// CDN): faults first, then Range, then the body from disk.
import Foundation

struct FileResponder {
    let state: HubState

    /// Answers a GET or HEAD for `file`; `headers` are added to every answer that serves it.
    func respond(to request: HubRequest, file: ServedFile, fileKey: String, onCDN: Bool,
                 headers: [(name: String, value: String)], channel: BodyChannel = .file) -> HubResponse {
        state.ledger.recordFileRequest(fileKey)
        let ignoreRange: Bool
        switch state.faults.admission(for: fileKey, onCDN: onCDN) {
        case .expired:
            return HubResponse(status: 403, headers: [("Content-Type", "application/xml")], body: .bytes(Data(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>".utf8)))
        case .refuse(let status, let retryAfter):
            var extra: [(name: String, value: String)] = []
            if let retryAfter { extra.append(("Retry-After", String(retryAfter))) }
            return .hubError(status, code: nil, message: "injected fault: \(status) for \(fileKey)", headers: extra)
        case .serve(let ignore):
            ignoreRange = ignore
        }
        var responseHeaders = headers + [("Accept-Ranges", "bytes"), ("Content-Type", "application/octet-stream")]
        let range = ignoreRange ? .whole : ByteRange.parse(request.header("Range"), size: file.size)
        switch range {
        case .whole:
            return HubResponse(status: 200, headers: responseHeaders, body: .file(
                FileBody(diskPath: file.diskPath, fileKey: fileKey, offset: 0, length: file.size, channel: channel)))
        case .part(let first, let last):
            responseHeaders.append(("Content-Range", "bytes \(first)-\(last)/\(file.size)"))
            return HubResponse(status: 206, headers: responseHeaders, body: .file(
                FileBody(diskPath: file.diskPath, fileKey: fileKey, offset: first, length: last - first + 1, channel: channel)))
        case .unsatisfiable:
            return HubResponse(status: 416, headers: headers + [("Content-Range", "bytes */\(file.size)")])
        }
    }
}

/// What a Range header asks of a body of known size.
enum ByteRange: Equatable {
    /// No usable Range (absent, not bytes, several ranges, or malformed): the whole body.
    case whole
    /// Bytes `first...last`, already clamped to the body.
    case part(first: Int, last: Int)
    /// The range starts past the end.
    case unsatisfiable

    static func parse(_ header: String?, size: Int) -> ByteRange {
        guard let header = header?.trimmingCharacters(in: .whitespaces), header.lowercased().hasPrefix("bytes=") else {
            return .whole
        }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let startText = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let endText = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if startText.isEmpty {
            guard let suffix = Int(endText), suffix >= 0 else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(first: max(0, size - suffix), last: size - 1)
        }
        guard let first = Int(startText), first >= 0 else { return .whole }
        var last = size - 1
        if !endText.isEmpty {
            guard let end = Int(endText), end >= first else { return .whole }
            last = min(end, size - 1)
        }
        guard first < size else { return .unsatisfiable }
        return .part(first: first, last: last)
    }
}
