// A planned file of known bytes for the spool's in-process tests (the splicer's, the in-place
// ranges'), with its staging file: one recipe, so both pin the same plan.
import Digest
import Foundation
import HubTypes
import ModelCache
import Spool

extension PlannedFile {
    /// `org/name`'s `model.safetensors` of `size` patterned bytes in `base`'s models folder, in
    /// ranges of `rangeSize`, planned by node1; and its bytes.
    static func patterned(size: Int, rangeSize: Int64, in base: URL) -> (PlannedFile, Data) {
        let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        let file = RepoFile(path: "model.safetensors", size: Int64(size), blobID: String(repeating: "a", count: 40),
                            sha256: SHA256.hex(of: bytes))
        let plan = PlannedFile(repo: "org/name", modelDir: base.appendingPathComponent("models/org/name").path,
                               commit: String(repeating: "c", count: 40), file: file, rangeSize: rangeSize, node: "node1")
        return (plan, bytes)
    }

    /// The file's staging file, opened (or started) as a worker opens it.
    func openStaging() throws -> StagingFile {
        try StagingFile(file: file, in: directory, commit: commit, rangeSize: rangeSize)
    }
}
