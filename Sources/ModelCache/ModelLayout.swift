// ModelLayout - every name a model directory holds beside the repo's files: the manifest, the
// staging folder `.incomplete/` and its entries, and `speech cache rm`'s trash. Each name is
// written and parsed here only; docs/protocol.md ("Layout") lists them.
import Digest
import Foundation
import SharedFiles

/// The model directory's own names and their parsers (the spool's are `SpoolLayout`).
///
/// `.incomplete/` is one flat folder: a staged file's entries all begin with its staging name
/// (`stagingName(_:)`), and `owner(ofEntry:)` reads that name back from any of them.
public enum ModelLayout {
    /// The manifest: the snapshot the files came from.
    public static let manifest = ".speech-fetch.json"
    /// The staging folder.
    public static let staging = ".incomplete"

    static let sidecarSuffix = ".sidecar.json"
    static let lockSuffix = ".lock"
    static let importMarker = ".import."
    /// What a broken lock's name adds to the lock's: `.broken.<node>.<pid>.<n>`.
    static let brokenMarker = ".broken."
    /// AtomicFile's temp name of a file: `.<name>.tmp.<pid>.<n>`.
    static let tempMarker = AtomicFile.tempMarker
    static let removalMarker = ".removing."

    // MARK: Writing

    /// `a/b.safetensors` → `a%2Fb.safetensors`: one flat folder, reversible, no collisions.
    /// The dot of `.lock`, `.sidecar.json` and `.import.` is written `%2E` (`uv.lock` →
    /// `uv%2Elock`), so no staging name looks like another file's lock, sidecar or import link
    /// (the lock of `uv` is `uv.lock`) and every entry of `.incomplete/` has one owner.
    /// Works on UTF-8 bytes: a combining mark after `/` must not hide the slash.
    public static func stagingName(_ repoPath: String) -> String {
        let name = encodedName(repoPath)
        guard name.count > maxStagingName else { return String(decoding: name, as: UTF8.self) }
        // Too long for one directory entry once `.sidecar.json.tmp.<pid>.<n>` or
        // `.lock.broken.<node>.<pid>.<n>` is added (NAME_MAX is 255 bytes): keep a readable
        // head, cut where no `%XX` escape or UTF-8 sequence is split, and name the rest by the
        // SHA-256 of the whole repo path. `%#` never occurs in an encoded name (every `%` there
        // starts `%25`, `%2F` or `%2E`), so a hashed name is never another path's plain one.
        var cut = maxStagingName - hashedMarker.utf8.count - 64
        while cut > 0 && (name[cut] & 0xC0) == 0x80 { cut -= 1 }
        if let percent = name[max(0, cut - 2)..<cut].lastIndex(of: UInt8(ascii: "%")) { cut = percent }
        let digest = SHA256.smallHex(of: Data(repoPath.utf8))
        return String(decoding: name[..<cut], as: UTF8.self) + hashedMarker + digest
    }

    /// The most bytes a staging name has (docs/protocol.md, "Layout"): with the longest suffix
    /// an entry of `.incomplete/` adds (a broken lock's, node name cut to `maxNodeInName`), every
    /// entry fits the 255 bytes of a directory entry.
    public static let maxStagingName = 150
    /// What a hashed staging name puts between its head and the digest.
    static let hashedMarker = "%#"
    /// The most bytes of a node's name that go into an entry's name.
    static let maxNodeInName = 48

    /// True for a staging name made from a repo path too long to encode whole (`stagingName(_:)`).
    public static func isHashed(_ stagingName: String) -> Bool { stagingName.contains(hashedMarker) }

    private static func encodedName(_ repoPath: String) -> [UInt8] {
        var name: [UInt8] = []
        name.reserveCapacity(repoPath.utf8.count)
        for byte in repoPath.utf8 {
            switch byte {
            case UInt8(ascii: "%"): name += "%25".utf8
            case UInt8(ascii: "/"): name += "%2F".utf8
            default: name.append(byte)
            }
        }
        for marker in [lockSuffix, sidecarSuffix, importMarker] {
            name = replacing(Array(marker.utf8), with: Array("%2E".utf8) + marker.utf8.dropFirst(), in: name)
        }
        return name
    }

    /// `<staging name>.sidecar.json`.
    public static func sidecarName(_ repoPath: String) -> String { stagingName(repoPath) + sidecarSuffix }

    /// `<staging name>.lock`.
    public static func lockName(_ repoPath: String) -> String { stagingName(repoPath) + lockSuffix }

    /// `<staging name>.import.<pid>`: `import-hf`'s link of a blob before its rename into place.
    public static func importName(_ repoPath: String, pid: Int32) -> String { stagingName(repoPath) + importMarker + "\(pid)" }

    /// `<lock>.broken.<node>.<pid>.<n>`: a lock moved aside while it is broken.
    static func brokenLockPath(_ lockPath: String, node: String, pid: Int32, n: UInt32) -> String {
        lockPath + brokenMarker + "\(String(decoding: node.utf8.prefix(maxNodeInName), as: UTF8.self)).\(pid).\(n)"
    }

    /// `pointer.<pid>.<n>` in `.incomplete/`: a huggingface_hub pointer (symlink) before its rename.
    static func pointerTempName(pid: Int32, n: UInt32) -> String { "pointer.\(pid).\(n)" }

    /// `.<name>.removing.<pid>.<n>`, beside the model directory `<name>`: `speech cache rm` moved it
    /// here and deletes it.
    public static func removalName(ofModel name: String, pid: Int32, n: UInt32) -> String {
        ".\(name)\(removalMarker)\(pid).\(n)"
    }

    // MARK: Reading

    /// `a%2Fb%25c%2Elock` → `a/b%c.lock`: the inverse of `stagingName(_:)`. A hashed name
    /// (`isHashed`) gives its readable head followed by `…`, not the whole path.
    public static func repoPath(stagingName: String) -> String {
        if let marker = stagingName.range(of: hashedMarker) {
            return repoPath(stagingName: String(stagingName[..<marker.lowerBound])) + "…"
        }
        let bytes = Array(stagingName.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let code = bytes[i] == UInt8(ascii: "%") ? String(decoding: bytes[i..<min(i + 3, bytes.count)], as: UTF8.self) : ""
            switch code {
            case "%2F": out.append(UInt8(ascii: "/")); i += 3
            case "%25": out.append(UInt8(ascii: "%")); i += 3
            case "%2E": out.append(UInt8(ascii: ".")); i += 3
            default: out.append(bytes[i]); i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The staging name an entry of `.incomplete/` belongs to: `<name>`, `<name>.sidecar.json`,
    /// `<name>.lock`, a sidecar's temp file `.<name>.sidecar.json.tmp.*`, a broken lock
    /// `<name>.lock.broken.*`, or an import's temp link `<name>.import.*`. Works on UTF-8 bytes,
    /// as `stagingName(_:)` writes them (a name may begin with a combining mark, which Swift's
    /// characters would join to the dot before it).
    public static func owner(ofEntry entry: String) -> String {
        let bytes = Array(entry.utf8)
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        func find(_ marker: String, from start: Int = 0) -> Int? {
            let m = Array(marker.utf8)
            guard bytes.count >= m.count + start else { return nil }
            return (start...(bytes.count - m.count)).first { bytes[$0...].starts(with: m) }
        }
        for suffix in [lockSuffix, sidecarSuffix] where bytes.count >= suffix.utf8.count && bytes.suffix(suffix.utf8.count).elementsEqual(suffix.utf8) {
            return text(0..<(bytes.count - suffix.utf8.count))
        }
        for marker in [lockSuffix + brokenMarker, importMarker] {
            if let at = find(marker) { return text(0..<at) }
        }
        if bytes.first == UInt8(ascii: "."), let at = find(sidecarSuffix + tempMarker, from: 1) { return text(1..<at) }
        return entry
    }

    /// The repo path whose staging lock `entry` is; nil for any other entry.
    public static func lockedRepoPath(_ entry: String) -> String? {
        entry.hasSuffix(lockSuffix) ? repoPath(stagingName: String(entry.dropLast(lockSuffix.count))) : nil
    }

    /// True when `entries` (of one staging name) hold staged bytes or their record: the staging
    /// file or its sidecar, not just a lock or temp files.
    public static func holdsStagedFile(_ stagingName: String, entries: [String]) -> Bool {
        entries.contains { $0 == stagingName || $0 == stagingName + sidecarSuffix }
    }

    /// True when `entry` is the staging lock of `stagingName` (kept while the rest is deleted under it).
    public static func isLock(_ entry: String, of stagingName: String) -> Bool { entry == stagingName + lockSuffix }

    /// The one list of the names a model directory (or a huggingface_hub repo folder) keeps for
    /// itself at its top level: `.incomplete/`, and every name beginning `.speech-fetch` (the
    /// manifest, the use markers `.speech-fetch-used[-<commit>]`, huggingface_hub's
    /// `.speech-fetch-evicted/`) or `..speech-fetch` (AtomicFile's temp files of those, e.g. a
    /// manifest temp left by a kill). A new bookkeeping file takes a name beginning
    /// `.speech-fetch`, so every walk that judges completeness, counts files or sizes a model
    /// (`ModelDirectory.listFiles`, `speech cache ls`, the size cap, `weightsExist`) leaves it
    /// out through `isBookkeeping` without being told. RepoPath refuses `.incomplete` and
    /// `.speech-fetch*` as repo paths.
    public static let bookkeepingPrefixes = [".speech-fetch", "..speech-fetch"]

    /// True for a top-level name of the cache's own (`bookkeepingPrefixes`, `.incomplete`): never
    /// a model's file.
    public static func isBookkeeping(_ topLevelName: String) -> Bool {
        topLevelName == staging || bookkeepingPrefixes.contains { topLevelName.hasPrefix($0) }
    }

    /// True for AtomicFile's temp file of the manifest (`..speech-fetch.json.tmp.*`).
    public static func isManifestTemp(_ name: String) -> Bool { name.hasPrefix("." + manifest + tempMarker) }

    /// True for a model directory `rm` moved aside (`.<name>.removing.*`).
    public static func isRemoval(_ name: String) -> Bool { name.hasPrefix(".") && name.contains(removalMarker) }

    private static func replacing(_ target: [UInt8], with replacement: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            if bytes[i] == target[0], bytes[i...].starts(with: target) {
                out += replacement
                i += target.count
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }
}

extension ModelDirectory {
    /// `<directory>/.incomplete/<name>`: an entry of the staging folder.
    public func stagingPath(_ name: String) -> String { stagingDirectory.path + "/" + name }
}
