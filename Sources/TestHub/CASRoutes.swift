// CASRoutes - the Xet CAS on the CDN listener: reconstructions (v2 and v1, with Range pages)
// behind the access token, and pre-signed xorb URLs that serve any sub-range, one range or
// several (multipart/byteranges), without Authorization.
import Foundation
import Xet

struct CASRoutes {
    let state: HubState

    /// `GET /v2/reconstructions/{file hash}` or `/v1/...`.
    func reconstruction(_ request: HubRequest, version: XetReconstruction.Version, hashText: String) -> HubResponse {
        guard request.method == "GET" else { return .text(405, "method \(request.method) not allowed") }
        guard state.acceptsXetToken(request) else {
            return casError(401, "the Xet access token is missing, wrong or expired: get a new one from xet-read-token")
        }
        guard let hash = XetHash(hex: hashText), let file = state.xetStore.file(withHash: hash),
              let fileKey = state.xetFileKey(of: hash) else {
            return casError(404, "no file with Xet hash \(hashText)")
        }
        let (admission, stall) = state.faults.reconstructionAdmission(for: fileKey)
        if let stall, !state.stopSignal.sleep(stall) { return casError(503, "stopping") }
        switch admission {
        case .tokenExpired:
            return casError(401, "the Xet access token has expired (injected fault for \(fileKey))")
        case .refuse(let status, let retryAfter):
            var headers: [(name: String, value: String)] = []
            if let retryAfter { headers.append(("Retry-After", String(retryAfter))) }
            return casError(status, "injected fault: \(status) for \(fileKey)", headers: headers)
        case .serve:
            break
        }
        let first: Int, last: Int
        switch ByteRange.parse(request.header("Range"), size: file.size) {
        case .whole: (first, last) = (0, file.size - 1)
        case .part(let a, let b): (first, last) = (a, b)
        case .unsatisfiable:
            return HubResponse(status: 416, headers: [("Content-Range", "bytes */\(file.size)")])
        }
        state.ledger.recordReconstruction(fileKey)
        let chosen = file.terms.filter { $0.fileOffset + $0.length > first && $0.fileOffset <= last }
        // Per xorb, the union of the chunk ranges its terms need, overlapping or touching ones
        // merged, as the Hub answers: hf_xet 1.8 takes the first fetch range that starts where a
        // term starts, and panics when that range is shorter than the term.
        var needed: [XetHash: [Range<Int>]] = [:]
        for term in chosen { needed[term.xorb, default: []].append(term.chunks) }
        var fetches: [XetHash: [XetReconstruction.Fetch]] = [:]
        for (hash, ranges) in needed {
            guard let xorb = state.xetStore.xorb(hash) else { return casError(500, "xorb \(hash.hex) is missing") }
            let url = state.xorbURL(hash.hex, fileKey: fileKey)
            var merged: [Range<Int>] = []
            for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
                if let last = merged.last, range.lowerBound <= last.upperBound {
                    merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
                } else {
                    merged.append(range)
                }
            }
            fetches[hash] = merged.map {
                XetReconstruction.Fetch(url: url, chunks: $0, bytes: xorb.chunkOffsets[$0.lowerBound]...(xorb.chunkOffsets[$0.upperBound] - 1))
            }
        }
        let answer = XetReconstruction(
            offsetIntoFirstRange: first - (chosen.first?.fileOffset ?? first),
            terms: chosen.map { XetReconstruction.Term(xorb: $0.xorb, chunks: $0.chunks, unpackedLength: $0.length) },
            fetches: fetches)
        return HubResponse(status: 200, headers: [("Content-Type", "application/json")], body: .bytes(answer.json(version)))
    }

    /// `GET /xorbs/{xorb hash}?file=&expires=&sig=`: the xorb's bytes, any range of them.
    func xorb(_ request: HubRequest, hashText: String) -> HubResponse {
        guard request.method == "GET" || request.method == "HEAD" else { return .text(405, "method \(request.method) not allowed") }
        let fileKey = request.queryValue("file") ?? ""
        let expires = Int(request.queryValue("expires") ?? "") ?? 0
        guard request.queryValue("sig") == state.signature(object: "xorb \(hashText) \(fileKey)", expires: expires) else {
            return denied("Signature does not match")
        }
        guard Double(expires) > Date().timeIntervalSince1970 else { return denied("Request has expired") }
        guard let hash = XetHash(hex: hashText), let xorb = state.xetStore.xorb(hash) else { return .text(404, "no such xorb") }
        state.ledger.recordXorbRequest(fileKey)
        if case .refuse(let status, let retryAfter) = state.faults.xorbAdmission(for: fileKey) {
            var headers: [(name: String, value: String)] = []
            if let retryAfter { headers.append(("Retry-After", String(retryAfter))) }
            return casError(status, "injected fault: \(status) for a xorb of \(fileKey)", headers: headers)
        }
        let flips = corruptOffsets(in: hash)
        let ranges = XorbRanges.parse(request.header("Range"), size: xorb.size)
        switch ranges {
        case .unsatisfiable:
            return HubResponse(status: 416, headers: [("Content-Range", "bytes */\(xorb.size)")])
        case .list(let list) where list.count > 1:
            return multipart(list, of: xorb, fileKey: fileKey, flips: flips)
        case .list(let list):
            let (first, last) = list.first ?? (0, xorb.size - 1)
            var faults = state.faults.xorbBodyFaults(for: fileKey, length: last - first + 1)
            faults.flipOffsets = flips
            let body = FileBody(diskPath: xorb.path, fileKey: fileKey, offset: first, length: last - first + 1,
                                channel: .xorb, presetFaults: faults)
            var headers: [(name: String, value: String)] = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes")]
            if list.isEmpty { return HubResponse(status: 200, headers: headers, body: .file(body)) }
            // A truncated range (xorbTruncated) keeps the Content-Length of the whole range and
            // stops short (BodySender's dropAfter).
            headers.append(("Content-Range", "bytes \(first)-\(last)/\(xorb.size)"))
            return HubResponse(status: 206, headers: headers, body: .file(body))
        }
    }

    /// Several ranges in one answer, as `multipart/byteranges` (from memory; faults other than
    /// corrupt chunks do not apply to it).
    private func multipart(_ list: [(Int, Int)], of xorb: StoredXorb, fileKey: String, flips: [Int]) -> HubResponse {
        guard let handle = FileHandle(forReadingAtPath: xorb.path) else { return casError(500, "xorb unreadable") }
        defer { try? handle.close() }
        let boundary = "testhub-\(UInt64.random(in: 1...UInt64.max))"
        var body = Data()
        var payload = 0
        for (first, last) in list {
            body += Data("--\(boundary)\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes \(first)-\(last)/\(xorb.size)\r\n\r\n".utf8)
            try? handle.seek(toOffset: UInt64(first))
            var bytes = (try? handle.read(upToCount: last - first + 1)) ?? Data()
            for offset in flips where offset >= first && offset <= last && offset - first < bytes.count {
                bytes[bytes.startIndex + offset - first] ^= 0xFF
            }
            payload += bytes.count
            body += bytes + Data("\r\n".utf8)
        }
        body += Data("--\(boundary)--\r\n".utf8)
        let tally = state.ledger.beginBody(of: fileKey, at: 0, channel: .xorb)
        state.ledger.book(payload, on: tally)
        return HubResponse(status: 206, headers: [("Content-Type", "multipart/byteranges; boundary=\(boundary)")], body: .bytes(body))
    }

    /// Offsets in xorb `hash` that corrupt-chunk faults flip.
    private func corruptOffsets(in hash: XetHash) -> [Int] {
        state.faults.corruptChunks().compactMap { fault in
            guard let file = state.xetFileKeyed(fault.file),
                  let place = state.xetStore.storedByte(ofChunk: fault.chunk, in: file), place.xorb == hash else { return nil }
            return place.offset
        }
    }

    private func casError(_ status: Int, _ message: String, headers: [(name: String, value: String)] = []) -> HubResponse {
        .json(.object([("error", .string(message))]), status: status, headers: headers)
    }

    private func denied(_ why: String) -> HubResponse {
        HubResponse(status: 403, headers: [("Content-Type", "application/xml")], body: .bytes(Data(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>\(why)</Message></Error>".utf8)))
    }
}

/// What a Range header asks of a xorb: no range (the whole xorb), one or several ranges.
enum XorbRanges {
    case list([(Int, Int)])
    case unsatisfiable

    static func parse(_ header: String?, size: Int) -> XorbRanges {
        guard let header, header.lowercased().hasPrefix("bytes=") else { return .list([]) }
        var list: [(Int, Int)] = []
        for spec in header.dropFirst(6).split(separator: ",") {
            switch ByteRange.parse("bytes=" + spec.trimmingCharacters(in: .whitespaces), size: size) {
            case .part(let first, let last): list.append((first, last))
            case .unsatisfiable: continue
            case .whole: return .list([])
            }
        }
        return list.isEmpty ? .unsatisfiable : .list(list)
    }
}
