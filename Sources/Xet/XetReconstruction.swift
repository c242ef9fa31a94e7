import Foundation

/// How to rebuild a file (or a byte range of it) from xorbs: the CAS's answer to
/// `GET /v2/reconstructions/{file hash}` (or v1), parsed strictly, since it is outside input.
public struct XetReconstruction: Sendable, Equatable {
    /// Chunks `chunks` (end exclusive) of xorb `xorb`, which decode to `unpackedLength` bytes.
    public struct Term: Sendable, Equatable {
        public var xorb: XetHash
        public var chunks: Range<Int>
        public var unpackedLength: Int

        public init(xorb: XetHash, chunks: Range<Int>, unpackedLength: Int) {
            self.xorb = xorb
            self.chunks = chunks
            self.unpackedLength = unpackedLength
        }
    }

    /// Where chunks `chunks` of a xorb can be fetched: `bytes` (inclusive) of the signed `url`.
    public struct Fetch: Sendable, Equatable {
        public var url: String
        public var chunks: Range<Int>
        public var bytes: ClosedRange<Int>

        public init(url: String, chunks: Range<Int>, bytes: ClosedRange<Int>) {
            self.url = url
            self.chunks = chunks
            self.bytes = bytes
        }
    }

    /// Bytes of the first term to drop to begin at the offset asked for.
    public var offsetIntoFirstRange: Int
    public var terms: [Term]
    public var fetches: [XetHash: [Fetch]]

    public init(offsetIntoFirstRange: Int, terms: [Term], fetches: [XetHash: [Fetch]]) {
        self.offsetIntoFirstRange = offsetIntoFirstRange
        self.terms = terms
        self.fetches = fetches
    }

    /// Limits on what a reconstruction may hold (a 256 MB page has a few thousand terms).
    public static let maximumBytes = 64 * 1024 * 1024
    public static let maximumTerms = 1_000_000
    public static let maximumURLBytes = 8192

    public enum Version: Int, Sendable { case v1 = 1, v2 = 2 }

    /// Parses and checks an answer: every hash well formed, every range non-empty and within a
    /// xorb's limits, every term covered by a fetch of its xorb, the offset inside the first term.
    public static func parse(_ data: Data, version: Version) throws(XetFormatError) -> XetReconstruction {
        guard data.count <= maximumBytes else { throw .reconstruction("the answer is \(data.count) bytes, more than \(maximumBytes)") }
        let object: Any
        do { object = try JSONSerialization.jsonObject(with: data) } catch {
            throw .reconstruction("the answer is not JSON (\(data.count) bytes)")
        }
        guard let top = object as? [String: Any] else { throw .reconstruction("the answer is not a JSON object") }
        let offset = try integer(top["offset_into_first_range"], "offset_into_first_range")
        guard let rawTerms = top["terms"] as? [Any] else { throw .reconstruction("\"terms\" is missing or not a list") }
        guard rawTerms.count <= maximumTerms else { throw .reconstruction("\(rawTerms.count) terms, more than \(maximumTerms)") }
        var terms: [Term] = []
        terms.reserveCapacity(rawTerms.count)
        for (i, raw) in rawTerms.enumerated() {
            guard let term = raw as? [String: Any] else { throw .reconstruction("term \(i) is not an object") }
            let xorb = try hash(term["hash"], "term \(i)'s hash")
            let length = try integer(term["unpacked_length"], "term \(i)'s unpacked_length")
            let chunks = try chunkRange(term["range"], "term \(i)'s range")
            guard length > 0, length <= chunks.count * ContentChunker.maximumLength else {
                throw .reconstruction("term \(i) claims \(length) bytes for \(chunks.count) chunks")
            }
            terms.append(Term(xorb: xorb, chunks: chunks, unpackedLength: length))
        }
        if let first = terms.first {
            guard offset < first.unpackedLength else {
                throw .reconstruction("offset_into_first_range \(offset) is past the first term's \(first.unpackedLength) bytes")
            }
        } else if offset != 0 {
            throw .reconstruction("offset_into_first_range \(offset) with no terms")
        }
        let key = version == .v2 ? "xorbs" : "fetch_info"
        guard let rawFetches = top[key] as? [String: Any] else { throw .reconstruction("\"\(key)\" is missing or not an object") }
        guard rawFetches.count <= maximumTerms else { throw .reconstruction("\(rawFetches.count) xorbs, more than \(maximumTerms)") }
        var fetches: [XetHash: [Fetch]] = [:]
        for (name, raw) in rawFetches {
            let xorb = try hash(name, "a \(key) key")
            guard let entries = raw as? [Any], !entries.isEmpty, entries.count <= maximumTerms else {
                throw .reconstruction("xorb \(name)'s entry is not a non-empty list")
            }
            var list: [Fetch] = []
            for entry in entries {
                guard let e = entry as? [String: Any] else { throw .reconstruction("xorb \(name) has an entry that is not an object") }
                let url = try urlString(e["url"], "xorb \(name)'s url")
                if version == .v1 {
                    list.append(Fetch(url: url, chunks: try chunkRange(e["range"], "xorb \(name)'s range"),
                                      bytes: try byteRange(e["url_range"], "xorb \(name)'s url_range")))
                } else {
                    guard let ranges = e["ranges"] as? [Any], !ranges.isEmpty, ranges.count <= maximumTerms else {
                        throw .reconstruction("xorb \(name)'s ranges are missing or empty")
                    }
                    for r in ranges {
                        guard let range = r as? [String: Any] else { throw .reconstruction("xorb \(name) has a range that is not an object") }
                        list.append(Fetch(url: url, chunks: try chunkRange(range["chunks"], "xorb \(name)'s chunks"),
                                          bytes: try byteRange(range["bytes"], "xorb \(name)'s bytes")))
                    }
                }
            }
            fetches[xorb] = list
        }
        for (i, term) in terms.enumerated() {
            let covered = fetches[term.xorb]?.contains { $0.chunks.lowerBound <= term.chunks.lowerBound && term.chunks.upperBound <= $0.chunks.upperBound } ?? false
            guard covered else { throw .reconstruction("term \(i) (xorb \(term.xorb.hex), chunks \(term.chunks)) has no fetch that covers it") }
        }
        return XetReconstruction(offsetIntoFirstRange: offset, terms: terms, fetches: fetches)
    }

    /// The answer as JSON in the given version's shape (what the test Hub serves).
    public func json(_ version: Version) -> Data {
        var xorbs: [String: Any] = [:]
        for (xorb, list) in fetches {
            if version == .v2 {
                // One entry per URL, its ranges together, as the Hub answers.
                var byURL: [(String, [[String: Any]])] = []
                for f in list {
                    let range: [String: Any] = ["chunks": ["start": f.chunks.lowerBound, "end": f.chunks.upperBound],
                                                "bytes": ["start": f.bytes.lowerBound, "end": f.bytes.upperBound]]
                    if let i = byURL.firstIndex(where: { $0.0 == f.url }) { byURL[i].1.append(range) } else { byURL.append((f.url, [range])) }
                }
                xorbs[xorb.hex] = byURL.map { ["url": $0.0, "ranges": $0.1] as [String: Any] }
            } else {
                xorbs[xorb.hex] = list.map { f -> [String: Any] in
                    ["url": f.url, "range": ["start": f.chunks.lowerBound, "end": f.chunks.upperBound],
                     "url_range": ["start": f.bytes.lowerBound, "end": f.bytes.upperBound]]
                }
            }
        }
        let object: [String: Any] = [
            "offset_into_first_range": offsetIntoFirstRange,
            "terms": terms.map { t -> [String: Any] in
                ["hash": t.xorb.hex, "unpacked_length": t.unpackedLength,
                 "range": ["start": t.chunks.lowerBound, "end": t.chunks.upperBound]]
            },
            version == .v2 ? "xorbs" : "fetch_info": xorbs,
        ]
        // Only numbers, strings, lists and objects: serialization cannot fail.
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }

    // MARK: strict readers

    private static func integer(_ value: Any?, _ what: String) throws(XetFormatError) -> Int {
        // JSONSerialization gives true and false as NSNumbers of type "c": not numbers here.
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else {
            throw .reconstruction("\(what) is missing or not a number")
        }
        let double = number.doubleValue
        guard double >= 0, double <= 9_007_199_254_740_992, double.rounded() == double else {
            throw .reconstruction("\(what) is \(number), not a whole number from 0 to 2^53")
        }
        return Int(double)
    }

    private static func hash(_ value: Any?, _ what: String) throws(XetFormatError) -> XetHash {
        guard let text = value as? String, let hash = XetHash(hex: text) else {
            throw .reconstruction("\(what) is not a 64-digit hex hash")
        }
        return hash
    }

    private static func chunkRange(_ value: Any?, _ what: String) throws(XetFormatError) -> Range<Int> {
        guard let object = value as? [String: Any] else { throw .reconstruction("\(what) is missing or not an object") }
        let start = try integer(object["start"], "\(what).start")
        let end = try integer(object["end"], "\(what).end")
        guard start < end, end <= XorbBuilder.maximumChunks else {
            throw .reconstruction("\(what) is chunks \(start)..<\(end), not a non-empty range within \(XorbBuilder.maximumChunks)")
        }
        return start..<end
    }

    private static func byteRange(_ value: Any?, _ what: String) throws(XetFormatError) -> ClosedRange<Int> {
        guard let object = value as? [String: Any] else { throw .reconstruction("\(what) is missing or not an object") }
        let start = try integer(object["start"], "\(what).start")
        let end = try integer(object["end"], "\(what).end")
        guard start <= end, end < XorbBuilder.maximumBytes else {
            throw .reconstruction("\(what) is bytes \(start)...\(end), not a range within a 64 MiB xorb")
        }
        return start...end
    }

    private static func urlString(_ value: Any?, _ what: String) throws(XetFormatError) -> String {
        guard let text = value as? String, text.utf8.count <= maximumURLBytes,
              text.hasPrefix("http://") || text.hasPrefix("https://") else {
            throw .reconstruction("\(what) is not an http(s) URL of at most \(maximumURLBytes) bytes")
        }
        return text
    }
}
