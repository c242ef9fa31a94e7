// XetChunkIndex - the cache base's index of Xet chunks already in final files: for each xorb,
// which final files hold which of its chunk ranges, at which offsets, with their chunk hashes.
// A new revision of a file (or another repo sharing xorbs) reads those chunks from the disk
// instead of the CAS (docs/xet.md, "Chunk store").
//
// Layout: `<base>/xet-index/<xorb hash>/<id>.json`, one entry per (xorb, final file), `id` the
// SHA-256 of the file's path; written only after the file verified (its Xet hash and SHA-256),
// whole, by rename (temp, fsync, rename), so a reader sees an old entry or a new one, never half.
// An entry is a pointer, not a proof: the file may have been replaced, changed or evicted since,
// so a reader trusts a chunk only when the bytes it reads hash to the entry's chunk hash.
import Digest
import Foundation
import SharedFiles

public struct XetChunkIndex: Sendable {
    public let root: URL
    /// The most bytes of one entry read back, and the most entries of one xorb looked at.
    public static let maxEntryBytes = 16 << 20
    public static let maxEntriesPerXorb = 64

    public init(base: URL) {
        root = base.appendingPathComponent("xet-index", isDirectory: true)
    }

    /// What one final file holds of one xorb: its terms from that xorb (`byteStart`/`byteEnd`
    /// are not used and may be -1).
    public struct Entry: Codable, Sendable, Equatable {
        public var path: String
        public var size: Int64
        public var fileHash: String
        public var spans: [XetDoneTerm]
    }

    /// Publishes the terms of the verified final file at `path` (absolute), one entry per xorb.
    /// Best effort: an entry that cannot be written is skipped (the next download fetches those
    /// chunks from the CAS).
    public func publish(path: String, size: Int64, fileHash: String, terms: [XetDoneTerm]) {
        let id = SHA256.smallHex(of: Data(path.utf8))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for (xorb, spans) in Dictionary(grouping: terms, by: \.xorb) where XetChunkIndex.isHash(xorb) {
            let folder = root.appendingPathComponent(xorb, isDirectory: true)
            guard (try? FileIO.makeDirectory(folder.path, mode: 0o755)) != nil,
                  let data = try? encoder.encode(Entry(path: path, size: size, fileHash: fileHash, spans: spans)) else { continue }
            try? AtomicFile.write(data, to: folder.appendingPathComponent(id + ".json"))
        }
    }

    /// The entries of `xorb` (unreadable, oversized or foreign ones left out).
    public func entries(of xorb: String) -> [Entry] {
        guard XetChunkIndex.isHash(xorb) else { return [] }
        let folder = root.appendingPathComponent(xorb, isDirectory: true).path
        guard let names = SharedFS.list(folder).value else { return [] }
        var entries: [Entry] = []
        for name in names.sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
            guard entries.count < XetChunkIndex.maxEntriesPerXorb,
                  let data = SharedFS.read(folder + "/" + name, limit: XetChunkIndex.maxEntryBytes).value,
                  let entry = try? JSONDecoder().decode(Entry.self, from: data),
                  entry.path.hasPrefix("/"), entry.spans.allSatisfy({ $0.xorb == xorb }) else { continue }
            entries.append(entry)
        }
        return entries
    }

    static func isHash(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }
}
