// FuzzXetReconstruction - the CAS's reconstruction answer (v2, and v1 when the input's first
// byte is odd), outside input that says which bytes to fetch from where.
import FuzzSupport
import Foundation
import Xet

fuzzMain { data in
    let version: XetReconstruction.Version = (data.first ?? 0) & 1 == 1 ? .v1 : .v2
    guard let answer = try? XetReconstruction.parse(data.dropFirst(), version: version) else { return }
    // Every term is fetchable: a fetch of its xorb covers its chunks, ranges are sane and bounded.
    for term in answer.terms {
        expect(!term.chunks.isEmpty && term.chunks.upperBound <= XorbBuilder.maximumChunks, "term chunks \(term.chunks)")
        expect(term.unpackedLength > 0 && term.unpackedLength <= term.chunks.count * ContentChunker.maximumLength,
               "term length \(term.unpackedLength) for \(term.chunks.count) chunks")
        let covered = answer.fetches[term.xorb]?.contains { $0.chunks.lowerBound <= term.chunks.lowerBound && term.chunks.upperBound <= $0.chunks.upperBound }
        expect(covered == true, "term \(term) has no covering fetch")
    }
    for (_, fetches) in answer.fetches {
        for fetch in fetches {
            expect(fetch.bytes.lowerBound >= 0 && fetch.bytes.upperBound < XorbBuilder.maximumBytes, "fetch bytes \(fetch.bytes)")
            expect(fetch.url.hasPrefix("http://") || fetch.url.hasPrefix("https://"), "fetch url \(fetch.url)")
        }
    }
    if let first = answer.terms.first { expect(answer.offsetIntoFirstRange < first.unpackedLength, "offset past the first term") }
    // What parses survives the test Hub's encoding in both versions.
    for again in [XetReconstruction.Version.v2, .v1] {
        let reparsed = try? XetReconstruction.parse(answer.json(again), version: again)
        expect(reparsed == answer, "the answer does not survive its own encoding (v\(again.rawValue))")
    }
}
