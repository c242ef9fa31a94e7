// `speech cache`: ls, verify (--fix), rm, clean and import-hf against real files: real symlinks
// in a huggingface_hub layout, real hard links, real staging locks and spool entries.
import CacheAdmin
import Digest
import Foundation
import HubTypes
import ModelCache
import SharedFiles
import SpeechFetch
import Spool
import TestHub
@testable import TestSupport
import XCTest

final class CacheAdminTests: HubTestCase {
    let node = "cachetest"
    var env: [String: String] { environment(extra: ["SPEECH_FETCH_NODE": node]) }
    var admin: CacheAdmin { CacheAdmin(cacheBase: cacheBase, environment: env) }
    var hfHome: URL { temp.appendingPathComponent("hf-home") }

    func cache(_ args: String...) -> (output: String, exitCode: Int32) {
        speechCache(args + ["--cache-base", cacheBase.path])
    }

    /// `speech cache <args>` as a process: its stdout and stderr together, and its exit status.
    func speechCache(_ args: [String]) -> (output: String, exitCode: Int32) {
        let p = Process()
        p.executableURL = speechBinary
        p.arguments = ["cache"] + args
        p.environment = env
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { return ("cannot run \(speechBinary.path): \(error)", -1) }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (String(decoding: data, as: UTF8.self), p.terminationStatus)
    }

    // MARK: Fixtures

    static func gitBlobID(_ data: Data) -> String {
        var h = SHA1()
        h.update(Data("blob \(data.count)\u{0}".utf8))
        h.update(data)
        return h.finalizeHex()
    }

    static func record(_ path: String, _ data: Data, lfs: Bool) -> RepoFile {
        RepoFile(path: path, size: Int64(data.count), blobID: gitBlobID(data), sha256: lfs ? SHA256.hex(of: data) : nil)
    }

    static func bytes(_ count: Int, seed: UInt8) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }

    /// A model directory as a finished download leaves it: files plus manifest. `absent` files are
    /// listed in the manifest but not written.
    @discardableResult
    func makeModel(_ repo: String, _ files: [String: Data], lfs: Set<String> = [], absent: Set<String> = [],
                   commit: String = String(repeating: "c", count: 40)) throws -> ModelDirectory {
        let directory = ModelDirectory(modelDir(repo))
        var records: [RepoFile] = []
        for (path, data) in files.sorted(by: { $0.key < $1.key }) {
            records.append(Self.record(path, data, lfs: lfs.contains(path)))
            if absent.contains(path) { continue }
            let url = directory.finalURL(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url)
        }
        try directory.writeManifest(RepoSnapshot(repo: repo, revision: "main", commit: commit, files: records))
        return directory
    }

    func setTimes(_ path: String, atime: Double, mtime: Double) {
        var times = [timespec(tv_sec: Int(atime), tv_nsec: 0), timespec(tv_sec: Int(mtime), tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW), 0, "utimensat \(path)")
    }

    func age(_ path: String, hours: Double) {
        let t = Date().timeIntervalSince1970 - hours * 3600
        setTimes(path, atime: t, mtime: t)
    }

    func lstatOf(_ path: String) -> stat {
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0, "lstat \(path)")
        return st
    }

    func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// A huggingface_hub cache entry: `hub/models--org--name/{blobs,snapshots/<commit>,refs/main}`,
    /// snapshot files as relative symlinks into blobs named by sha256 (LFS) or git blob id.
    /// `lie` names files whose blob name is the digest of other bytes (a corrupt blob).
    func makeHFRepo(_ repo: String, commit: String, _ files: [String: Data], lfs: Set<String>, lie: Set<String> = [],
                    hub: URL? = nil) throws -> URL {
        let hubDir = hub ?? hfHome.appendingPathComponent("hub")
        let repoDir = hubDir.appendingPathComponent("models--" + repo.replacingOccurrences(of: "/", with: "--"))
        let blobs = repoDir.appendingPathComponent("blobs")
        let snapshot = repoDir.appendingPathComponent("snapshots/\(commit)")
        try FileManager.default.createDirectory(at: blobs, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: repoDir.appendingPathComponent("refs"), withIntermediateDirectories: true)
        try Data(commit.utf8).write(to: repoDir.appendingPathComponent("refs/main"))
        for (path, data) in files {
            let named = lie.contains(path) ? data + Data("tampered".utf8) : data
            let blobName = lfs.contains(path) ? SHA256.hex(of: named) : Self.gitBlobID(named)
            let blob = blobs.appendingPathComponent(blobName)
            try data.write(to: blob)
            // atime older than mtime: any ordinary read (relatime included) would move it.
            let now = Date().timeIntervalSince1970
            setTimes(blob.path, atime: now - 3 * 86_400, mtime: now - 2 * 86_400)
            let link = snapshot.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
            let depth = path.split(separator: "/").count - 1
            let target = String(repeating: "../", count: depth + 2) + "blobs/" + blobName
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: target)
        }
        return repoDir
    }

    /// Every path under `dir` with what must not change: kind, size, mtime, atime, link target, content digest.
    func fingerprint(_ dir: URL) throws -> [String: String] {
        var out: [String: String] = [:]
        let walker = FileManager.default.enumerator(atPath: dir.path)!
        while let rel = walker.nextObject() as? String {
            let path = dir.path + "/" + rel
            let st = lstatOf(path)
            var line = "mode=\(st.st_mode) size=\(st.st_size) mtime=\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
            if (st.st_mode & S_IFMT) == S_IFLNK {
                line += " -> " + (try FileManager.default.destinationOfSymbolicLink(atPath: path))
            } else if (st.st_mode & S_IFMT) == S_IFREG {
                line += " atime=\(st.st_atim.tv_sec).\(st.st_atim.tv_nsec)"
            }
            out[rel] = line
        }
        // Content read with O_NOATIME, after the atimes were recorded.
        for (rel, line) in out where line.contains("atime=") {
            out[rel] = line + " sha256=" + SHA256.hex(of: try Self.readWithoutAtime(dir.path + "/" + rel))
        }
        return out
    }

    static func readWithoutAtime(_ path: String) throws -> Data {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | 0o1000000)  // O_NOATIME
        guard fd >= 0 else { throw CocoaError(.fileReadNoPermission) }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true).readDataToEndOfFile()
    }

    /// The blob a snapshot symlink points at.
    func blobPath(_ link: URL) -> String {
        guard let resolved = realpath(link.path, nil) else { return link.path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    // MARK: ls

    func testListReportsStateSizeAndLastUse() throws {
        let weights = Self.bytes(200_000, seed: 1)
        let done = try makeModel("acme/Done", ["model.safetensors": weights, "config.json": Data("{}".utf8)],
                                 lfs: ["model.safetensors"])
        try makeModel("acme/Partial", ["model.safetensors": weights, "config.json": Data("{}".utf8)],
                      lfs: ["model.safetensors"], absent: ["model.safetensors"])
        let staged = try makeModel("acme/Staged", ["config.json": Data("{}".utf8)])
        try FileManager.default.createDirectory(at: staged.stagingDirectory, withIntermediateDirectories: true)
        try Data(count: 4096).write(to: staged.stagingDirectory.appendingPathComponent("weights%2Fa.bin"))
        let busy = try makeModel("acme/Busy", ["config.json": Data("{}".utf8)])
        let lock = try XCTUnwrap(StagingLock.acquire("model.safetensors", in: busy, owner: LockOwner(node: node), lease: 30))
        defer { lock.release() }
        let requested = try makeModel("acme/Requested", ["config.json": Data("{}".utf8)])
        let spool = try Spool(base: cacheBase, node: node)
        try spool.submit(SpoolRequest(repo: "acme/Requested", revision: "main", commit: String(repeating: "c", count: 40),
                                      modelDir: requested.path, files: [Self.record("x.bin", Data([1]), lfs: true)], node: node))

        // Read yesterday, written two days ago → "accessed"; the partial one only written.
        let now = Date().timeIntervalSince1970
        setTimes(done.finalURL("model.safetensors").path, atime: now - 86_400, mtime: now - 2 * 86_400)
        setTimes(done.finalURL("config.json").path, atime: now - 3 * 86_400, mtime: now - 3 * 86_400)

        let models = Dictionary(uniqueKeysWithValues: admin.list().map { ($0.repo, $0) })
        XCTAssertEqual(models.keys.sorted(), ["acme/Busy", "acme/Done", "acme/Partial", "acme/Requested", "acme/Staged"])
        let d = try XCTUnwrap(models["acme/Done"])
        XCTAssertEqual(d.state, .complete)
        XCTAssertEqual(d.fileCount, 2)
        let allocated = ["model.safetensors", "config.json"].reduce(Int64(0)) { $0 + Int64(lstatOf(done.finalURL($1).path).st_blocks) * 512 }
        XCTAssertEqual(d.sizeOnDisk, allocated, "allocated bytes of the files, manifest excluded")
        XCTAssertGreaterThanOrEqual(d.sizeOnDisk, Int64(weights.count))
        XCTAssertEqual(d.lastUsedKind, .accessed)
        XCTAssertEqual(d.lastUsed?.timeIntervalSince1970 ?? 0, now - 86_400, accuracy: 1)
        XCTAssertEqual(d.commit, String(repeating: "c", count: 40))

        XCTAssertEqual(models["acme/Partial"]?.state, .incomplete)
        XCTAssertEqual(models["acme/Partial"]?.missing, ["model.safetensors"])
        XCTAssertEqual(models["acme/Partial"]?.lastUsedKind, .modified)
        XCTAssertEqual(models["acme/Staged"]?.state, .incomplete)
        XCTAssertEqual(models["acme/Staged"]?.staged, ["weights/a.bin"])
        XCTAssertEqual(models["acme/Busy"]?.state, .inFlight)
        XCTAssertTrue(models["acme/Busy"]?.inFlight.first?.contains("\(node)@\(getpid())") ?? false)
        XCTAssertEqual(models["acme/Requested"]?.state, .inFlight)

        let (output, code) = cache("ls")
        XCTAssertEqual(code, 0)
        XCTAssertTrue(output.contains("acme/Busy") && output.contains("in flight"), output)
        XCTAssertTrue(output.contains("(accessed)") && output.contains("(modified)"), output)
        XCTAssertTrue(output.contains("5 models"), output)
    }

    // MARK: verify

    func testVerifyFindsAFlippedByteAndFixDeletesIt() throws {
        let weights = Self.bytes(300_000, seed: 7)
        let directory = try makeModel("acme/Verify", ["model.safetensors": weights, "config.json": Data("{\"a\":1}".utf8)],
                                      lfs: ["model.safetensors"])
        var (output, code) = cache("verify")
        XCTAssertEqual(code, 0, output)
        XCTAssertTrue(output.contains("2 re-hashed"), output)  // the LFS file and config.json (its git blob id)

        // Flip one byte in place: same size, other content.
        let path = directory.finalURL("model.safetensors").path
        let fd = open(path, O_RDWR)
        var byte: UInt8 = 0
        XCTAssertEqual(pread(fd, &byte, 1, 123_456), 1)
        byte ^= 0x01
        XCTAssertEqual(pwrite(fd, &byte, 1, 123_456), 1)
        close(fd)
        var flipped = weights
        flipped[123_456] ^= 0x01

        let report = try admin.verify(repo: "acme/Verify")
        XCTAssertEqual(report.corrupt, [CorruptFile(repo: "acme/Verify", path: "model.safetensors",
                                                    expected: "sha256 " + SHA256.hex(of: weights),
                                                    actual: "sha256 " + SHA256.hex(of: flipped), deleted: false)])
        (output, code) = cache("verify", "acme/Verify")
        XCTAssertEqual(code, 1)
        XCTAssertTrue(output.contains("CORRUPT acme/Verify model.safetensors") && output.contains(SHA256.hex(of: flipped)), output)
        XCTAssertTrue(exists(path), "verify without --fix deletes nothing")

        // No daemon: --fix deletes and says how to fetch it again.
        (output, code) = cache("verify", "--fix")
        XCTAssertEqual(code, 1)
        XCTAssertFalse(exists(path))
        XCTAssertTrue(exists(directory.finalURL("config.json").path))
        XCTAssertTrue(output.contains("deleted") && output.contains("speech download acme/Verify --revision"), output)
        (output, code) = cache("verify")
        XCTAssertEqual(code, 0, output)
        XCTAssertTrue(output.contains("1 listed but not on disk"), output)

        // A daemon serves the base (a live supervisor heartbeat of this node): --fix re-queues.
        try weights.write(to: URL(fileURLWithPath: path))
        let truncated = open(path, O_WRONLY)
        XCTAssertEqual(ftruncate(truncated, 1000), 0)
        close(truncated)
        let spool = try Spool(base: cacheBase, node: node)
        try Data("\(getpid())".utf8).write(to: URL(fileURLWithPath: spool.layout.supervisor(node)))
        let fixed = try admin.verify(fix: true)
        XCTAssertEqual(fixed.corrupt.map(\.actual), ["1000 bytes"])
        XCTAssertEqual(fixed.corrupt.map(\.deleted), [true])
        XCTAssertEqual(fixed.requeued.count, 1)
        let request = try XCTUnwrap(spool.requests().first { $0.id == fixed.requeued.first })
        XCTAssertEqual(request.files.map(\.path), ["model.safetensors"])
        XCTAssertEqual(request.modelDir, directory.path)
        XCTAssertEqual(spool.state(of: request.id), .active)
        XCTAssertFalse(exists(path))
    }

    // MARK: rm

    func testRemoveRefusesWhileAStagingLockIsHeld() throws {
        let directory = try makeModel("acme/Remove", ["model.safetensors": Self.bytes(50_000, seed: 3)], lfs: ["model.safetensors"])
        let spool = try Spool(base: cacheBase, node: node)
        let settled = SpoolRequest(repo: "acme/Remove", revision: "main", commit: String(repeating: "c", count: 40),
                                   modelDir: directory.path, files: [Self.record("model.safetensors", Data(), lfs: true)], node: node)
        try spool.submit(settled)
        spool.markDone(settled.id)

        let lock = try XCTUnwrap(StagingLock.acquire("model.safetensors", in: directory, owner: LockOwner(node: node), lease: 30))
        XCTAssertThrowsError(try admin.remove(repo: "acme/Remove")) { error in
            guard case CacheAdminError.inFlight(_, _, let reasons) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reasons.joined().contains("model.safetensors"), "\(reasons)")
        }
        let (output, code) = cache("rm", "acme/Remove")
        XCTAssertEqual(code, 1)
        XCTAssertTrue(output.contains("in flight"), output)
        XCTAssertTrue(exists(directory.finalURL("model.safetensors").path))

        lock.release()
        let removed = try admin.remove(repo: "acme/Remove")
        XCTAssertFalse(exists(directory.path))
        XCTAssertFalse(exists(cacheBase.appendingPathComponent("models/acme").path), "the empty org folder goes too")
        XCTAssertGreaterThanOrEqual(removed.bytesFreed, 50_000)
        XCTAssertEqual(removed.requestsDropped, 1, "a done request would make `speech wait` answer ready")
        XCTAssertTrue(spool.requests().isEmpty)

        let again = cache("rm", "acme/Remove")
        XCTAssertEqual(again.exitCode, 1)
        XCTAssertTrue(again.output.contains("not in the cache"), again.output)
        XCTAssertEqual(cache("rm").exitCode, 64)
    }

    // MARK: clean

    func testCleanRemovesOldOrphansButNotFreshOrLockedOnes() throws {
        let directory = try makeModel("acme/Clean", ["config.json": Data("{}".utf8)])
        let staging = directory.stagingDirectory.path
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        func stage(_ name: String, hours: Double) throws {
            for entry in [name, name + ".sidecar.json"] {
                try Self.bytes(8192, seed: 5).write(to: URL(fileURLWithPath: staging + "/" + entry))
                if hours > 0 { age(staging + "/" + entry, hours: hours) }
            }
        }
        // Old, its lock left by a process that died: an orphan.
        try stage("old.safetensors", hours: 48)
        try Data("\(node)@\(try deadPid())".utf8).write(to: URL(fileURLWithPath: staging + "/old.safetensors.lock"))
        age(staging + "/old.safetensors.lock", hours: 48)
        // Fresh: kept.
        try stage("fresh.safetensors", hours: 0)
        // Old but locked by this live process, whose lease is current (a holder refreshes its
        // lock; `speech cache clean` runs as another process, which breaks an expired lease): kept.
        try stage("locked.safetensors", hours: 48)
        let lock = try XCTUnwrap(StagingLock.acquire("locked.safetensors", in: directory, owner: LockOwner(node: node), lease: 30))
        defer { lock.release() }
        // Old but an active request still wants it: kept.
        try stage("wanted.safetensors", hours: 48)

        let spool = try Spool(base: cacheBase, node: node)
        let commit = String(repeating: "c", count: 40)
        let doneRequest = SpoolRequest(repo: "acme/Clean", revision: "main", commit: commit, modelDir: directory.path,
                                       files: [Self.record("config.json", Data("{}".utf8), lfs: false)], node: node)
        try spool.submit(doneRequest)
        spool.markDone(doneRequest.id)
        age(spool.layout.request(doneRequest.id), hours: 48)
        age(spool.layout.doneMarker(doneRequest.id), hours: 48)
        let freshDone = SpoolRequest(repo: "acme/Clean", revision: "main", commit: commit, modelDir: directory.path,
                                     files: [Self.record("other.json", Data("{}".utf8), lfs: false)], node: node)
        try spool.submit(freshDone)
        spool.markDone(freshDone.id)
        let active = SpoolRequest(repo: "acme/Clean", revision: "main", commit: commit, modelDir: directory.path,
                                  files: [Self.record("wanted.safetensors", Data(count: 8192), lfs: true)], node: node)
        try spool.submit(active)
        age(spool.layout.request(active.id), hours: 48)
        // A plan for a model directory that was deleted, with a ready job and a part.
        let gone = cacheBase.appendingPathComponent("models/acme/Gone").path
        let orphanPlan = PlannedFile(repo: "acme/Gone", modelDir: gone, commit: commit,
                                     file: Self.record("w.bin", Data(count: 1 << 20), lfs: true), rangeSize: 1 << 19, node: node)
        try spool.plan(orphanPlan, pending: [0, 1])
        try Data(count: 1 << 19).write(to: URL(fileURLWithPath: spool.partPath(orphanPlan, 1)))
        // A part whose plan is gone, and a temp file of a dead process.
        let strayPart = spool.layout.part(String(repeating: "a", count: 24) + ".000000")
        try Data(count: 4096).write(to: URL(fileURLWithPath: strayPart))
        let deadTemp = spool.layout.path(.tmp, "request@\(node)@\(try deadPid())@1")
        try Data(count: 100).write(to: URL(fileURLWithPath: deadTemp))

        let (output, code) = cache("clean", "--older-than", "24")
        XCTAssertEqual(code, 0, output)
        XCTAssertFalse(exists(staging + "/old.safetensors"), output)
        XCTAssertFalse(exists(staging + "/old.safetensors.sidecar.json"))
        XCTAssertFalse(exists(staging + "/old.safetensors.lock"))
        for kept in ["fresh.safetensors", "fresh.safetensors.sidecar.json", "locked.safetensors", "locked.safetensors.lock",
                     "wanted.safetensors", "wanted.safetensors.sidecar.json"] {
            XCTAssertTrue(exists(staging + "/" + kept), "\(kept) must be kept\n\(output)")
        }
        XCTAssertFalse(exists(spool.layout.request(doneRequest.id)))
        XCTAssertFalse(exists(spool.layout.doneMarker(doneRequest.id)))
        XCTAssertTrue(exists(spool.layout.request(freshDone.id)), "settled recently: kept")
        XCTAssertTrue(exists(spool.layout.request(active.id)), "active: kept however old")
        XCTAssertNil(spool.plannedFile(orphanPlan.key))
        XCTAssertFalse(exists(spool.partPath(orphanPlan, 1)))
        XCTAssertFalse(spool.readyJobs().contains(orphanPlan.jobName(0)))
        XCTAssertFalse(exists(strayPart))
        XCTAssertFalse(exists(deadTemp))
        XCTAssertTrue(output.contains("freed"), output)
        XCTAssertTrue(output.contains("kept acme/Clean: wanted.safetensors"), output)

        // Nothing old is left: a second pass removes nothing.
        let second = admin.clean(olderThan: 24 * 3600)
        XCTAssertEqual(second.removed, [], "\(second.removed)")
    }

    // MARK: import-hf

    func testImportHFHardLinksVerifiedFilesAndLeavesTheHFCacheAlone() throws {
        let commit = "0123456789abcdef0123456789abcdef01234567"
        let files: [String: Data] = [
            "model.safetensors": Self.bytes(400_000, seed: 9),
            "config.json": Data("{\"model_type\": \"tiny\"}".utf8),
            "tokenizer/vocab.json": Data("{\"a\": 0}".utf8),
            "broken.safetensors": Self.bytes(10_000, seed: 4),
        ]
        let repoDir = try makeHFRepo("acme/Tiny", commit: commit, files, lfs: ["model.safetensors", "broken.safetensors"],
                                     lie: ["broken.safetensors"])
        let before = try fingerprint(hfHome)

        let (output, code) = speechCache(["import-hf", "--hf-home", hfHome.path, "--cache-base", cacheBase.path])
        XCTAssertEqual(code, 1, "a blob that fails its check is refused\n\(output)")
        XCTAssertTrue(output.contains("3 adopted (3 linked, 0 copied"), output)
        XCTAssertTrue(output.contains("refused broken.safetensors: content does not match its blob name"), output)
        XCTAssertEqual(try fingerprint(hfHome), before, "nothing in the huggingface_hub cache changed")

        let directory = ModelDirectory(modelDir("acme/Tiny"))
        for (path, data) in files where path != "broken.safetensors" {
            let ours = lstatOf(directory.finalURL(path).path)
            let blob = lstatOf(blobPath(repoDir.appendingPathComponent("snapshots/\(commit)/\(path)")))
            XCTAssertEqual(ours.st_ino, blob.st_ino, "\(path) is a hard link to its blob")
            XCTAssertEqual(ours.st_dev, blob.st_dev)
            XCTAssertEqual(ours.st_nlink, 2)
            XCTAssertEqual(try Self.readWithoutAtime(directory.finalURL(path).path), data)  // same inode: keep its atime
        }
        XCTAssertFalse(exists(directory.finalURL("broken.safetensors").path))
        XCTAssertFalse(exists(directory.stagingDirectory.path), "no staging left behind")

        let manifest = try XCTUnwrap(directory.readManifest())
        XCTAssertEqual(manifest.repo, "acme/Tiny")
        XCTAssertEqual(manifest.commit, commit)
        XCTAssertEqual(manifest.revision, "main")
        let byPath = Dictionary(uniqueKeysWithValues: manifest.files.map { ($0.path, $0) })
        XCTAssertEqual(byPath.keys.sorted(), ["config.json", "model.safetensors", "tokenizer/vocab.json"])
        XCTAssertEqual(byPath["model.safetensors"]?.sha256, SHA256.hex(of: files["model.safetensors"]!))
        XCTAssertEqual(byPath["model.safetensors"]?.size, 400_000)
        XCTAssertNil(byPath["config.json"]?.sha256)
        XCTAssertEqual(byPath["config.json"]?.blobID, Self.gitBlobID(files["config.json"]!))

        // Again: everything is already there; nothing is linked twice.
        let again = try admin.importHF(hfHome: hfHome)
        XCTAssertEqual(again.filesAdopted, 0)
        XCTAssertEqual(again.filesPresent, 3)
        XCTAssertEqual(try fingerprint(hfHome), before)

        // The adopted model is complete and verifies; its bytes are shared with the HF cache.
        let listed = try admin.model("acme/Tiny")
        XCTAssertEqual(listed.state, .complete)
        XCTAssertEqual(listed.sharedBytes, listed.sizeOnDisk)
        XCTAssertEqual(cache("verify", "acme/Tiny").exitCode, 0)

        // Removing it from our cache leaves the HF cache whole.
        try admin.remove(repo: "acme/Tiny")
        XCTAssertEqual(lstatOf(blobPath(repoDir.appendingPathComponent("snapshots/\(commit)/model.safetensors"))).st_nlink, 1)
        XCTAssertEqual(try SHA256.hex(ofFileAt: repoDir.appendingPathComponent("snapshots/\(commit)/model.safetensors").path),
                       SHA256.hex(of: files["model.safetensors"]!))
    }

    func testImportHFCopiesAcrossFilesystems() throws {
        let shm = URL(fileURLWithPath: "/dev/shm")
        guard DiskScanProbe.device(shm.path) != nil, DiskScanProbe.device(shm.path) != DiskScanProbe.device(temp.path) else {
            throw XCTSkip("no second filesystem (/dev/shm) beside \(temp.path)")
        }
        let home = shm.appendingPathComponent("speech-fetch-hf-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let commit = "89abcdef0123456789abcdef0123456789abcdef"
        let weights = Self.bytes(120_000, seed: 2)
        let repoDir = try makeHFRepo("acme/Far", commit: commit, ["model.safetensors": weights], lfs: ["model.safetensors"],
                                     hub: home.appendingPathComponent("hub"))
        let before = try fingerprint(home)
        let report = try admin.importHF(hfHome: home)
        XCTAssertEqual(report.filesCopied, 1)
        XCTAssertEqual(report.filesLinked, 0)
        XCTAssertEqual(report.bytesAdopted, 120_000)
        let ours = lstatOf(modelDir("acme/Far").appendingPathComponent("model.safetensors").path)
        XCTAssertEqual(ours.st_nlink, 1)
        XCTAssertEqual(try Data(contentsOf: modelDir("acme/Far").appendingPathComponent("model.safetensors")), weights)
        XCTAssertEqual(try fingerprint(home), before)
        XCTAssertEqual(lstatOf(repoDir.appendingPathComponent("blobs/\(SHA256.hex(of: weights))").path).st_nlink, 1)
    }

    /// What `import-hf` records is what a later online call needs to skip the files.
    func testImportedFilesAreNotDownloadedAgain() throws {
        let repo = "acme/Served"
        try TestHub.generateRepo(root: root, repo: repo, files: ["model.safetensors": 600_000])
        try TestHub.writeRepo(root: root, repo: repo, files: ["config.json": Data("{\"x\": 1}".utf8)])
        // Learn the Hub's listing (commit, sha256, blob ids) through a download elsewhere.
        let scratch = temp.appendingPathComponent("scratch")
        let probe = try downloader().downloadBlocking(repo: repo, cacheBaseDir: scratch)
        let listing = try XCTUnwrap(ModelDirectory(probe.directory).readManifest())
        let contents = try Dictionary(uniqueKeysWithValues: listing.files.map { ($0.path, try source(repo, $0.path)) })
        _ = try makeHFRepo(repo, commit: listing.commit, contents, lfs: Set(listing.files.filter(\.isLFS).map(\.path)))

        let imported = try admin.importHF(hfHome: hfHome)
        XCTAssertEqual(imported.filesAdopted, listing.files.count, "\(imported.repos.map(\.refused))")
        hub.resetCounters()
        let result = try download(repo)
        XCTAssertEqual(result.fetched, [])
        for file in listing.files { XCTAssertEqual(hub.bodyBytes(for: "\(repo)/\(file.path)"), 0, file.path) }
        try assertSameBytes(repo, "model.safetensors")
    }

    // MARK: CLI

    func testCommandLineParsing() {
        XCTAssertEqual(cache("frobnicate").exitCode, 64)
        XCTAssertEqual(cache("ls", "--fix").exitCode, 64)
        XCTAssertEqual(cache("clean", "--older-than", "soon").exitCode, 64)
        XCTAssertEqual(speechCache(["--help"]).exitCode, 0)
        let empty = cache("ls")
        XCTAssertEqual(empty.exitCode, 0)
        XCTAssertTrue(empty.output.contains("no models"), empty.output)
        let noHF = speechCache(["import-hf", "--hf-home", temp.appendingPathComponent("nowhere").path,
                                "--cache-base", cacheBase.path])
        XCTAssertEqual(noHF.exitCode, 1)
        XCTAssertTrue(noHF.output.contains("no huggingface_hub cache"), noHF.output)
    }
}

enum DiskScanProbe {
    static func device(_ path: String) -> UInt64? {
        var st = stat()
        return stat(path, &st) == 0 ? UInt64(st.st_dev) : nil
    }
}
