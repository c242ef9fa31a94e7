// FuzzSidecar - a staging file's sidecar (`.incomplete/<name>.sidecar.json`), read by a resume.
// Each input is written as the sidecar of one file, then a real StagingFile opens it, hashes on
// from what it kept (a saved SHA-256 state among it) and records it again.
// `FUZZ_WRITE_SEEDS=<dir>` instead writes real sidecars of that file there (the seed corpus).
import FuzzSupport
import Foundation
import HubTypes
import ModelCache

let file = RepoFile(path: "text/model.safetensors", size: 3 * 65536 + 100,
                    blobID: "5d2c2f3f4a8bd7b8d2e7e4c0e8f1a9b6c3d2e1f0",
                    sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
let commit = "0123456789abcdef0123456789abcdef01234567"
let rangeSize: Int64 = 65536
let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
let directory = ModelDirectory(URL(fileURLWithPath: "\(base)/speech-fetch-fuzz-sidecar.\(getpid())"))
let sidecar = StagingFile.sidecarURL(file.path, in: directory)

if let seeds = ProcessInfo.processInfo.environment["FUZZ_WRITE_SEEDS"] {
    // Sidecars as a transfer leaves them: fresh, two ranges hashed on, every range done.
    for (name, done) in [("fresh", [Int]()), ("two-ranges", [0, 1]), ("gap", [0, 2]), ("all", [0, 1, 2, 3])] {
        try? FileManager.default.removeItem(at: directory.url)
        let staging = try! StagingFile(file: file, in: directory, commit: commit, rangeSize: rangeSize)
        let bytes = [UInt8](repeating: 0x5a, count: Int(rangeSize))
        for i in done {
            let r = staging.range(i)
            try! bytes.withUnsafeBytes { try staging.write(UnsafeRawBufferPointer(rebasing: $0[0..<Int(r.end - r.start + 1)]), at: r.start) }
            staging.markDone(i)
        }
        try! staging.advanceHash()
        try! staging.persist()
        try! FileManager.default.copyItem(atPath: sidecar.path, toPath: "\(seeds)/\(name).json")
    }
    try? FileManager.default.removeItem(at: directory.url)
    exit(0)
}

try! FileManager.default.createDirectory(at: directory.stagingDirectory, withIntermediateDirectories: true)
atexit { try? FileManager.default.removeItem(atPath: "\(base)/speech-fetch-fuzz-sidecar.\(getpid())") }

fuzzMain { data in
    if let record = try? JSONDecoder().decode(Sidecar.self, from: data) {
        let again = try? JSONDecoder().decode(Sidecar.self, from: JSONEncoder().encode(record))
        expect(again == record, "a sidecar changes through encode and decode")
    }
    try! data.write(to: sidecar)
    guard let staging = try? StagingFile(file: file, in: directory, commit: commit, rangeSize: rangeSize) else {
        expect(false, "StagingFile refused to open over a bad sidecar instead of starting over"); return
    }
    expect(staging.rangeSize > 0, "range size \(staging.rangeSize)")
    expect(Int64(staging.rangeCount) * staging.rangeSize >= file.size, "\(staging.rangeCount) ranges do not cover the file")
    for i in staging.doneRanges { expect(i >= 0 && i < staging.rangeCount, "kept range \(i) of \(staging.rangeCount)") }
    do {
        try staging.advanceHash()
        try staging.persist()
    } catch {
        expect(false, "hashing on or recording a kept sidecar failed: \(error)")
    }
    let written = try? JSONDecoder().decode(Sidecar.self, from: Data(contentsOf: sidecar))
    expect(written != nil, "the sidecar written back does not read")
}
