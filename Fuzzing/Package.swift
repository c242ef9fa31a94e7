// swift-tools-version:6.0
// speech-fetch's fuzz targets: one libFuzzer executable per parser of outside input.
// Built by scripts/fuzz (`-sanitize=fuzzer,address -parse-as-library`), never by the root
// package's `swift build`; see docs/fuzzing.md.
import Foundation
import PackageDescription

// The root package's identity is its folder's name (`speech-fetch`, `main`, a worktree's name).
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "speech-fetch-fuzz",
    dependencies: [.package(path: "..")],
    targets: [
        .target(name: "CFuzzDriver"),
        .target(name: "FuzzSupport", dependencies: ["CFuzzDriver"]),
        .executableTarget(name: "FuzzTree", dependencies: ["FuzzSupport", .product(name: "HubClient", package: root), .product(name: "HubTypes", package: root), .product(name: "ModelCache", package: root)]),
        .executableTarget(name: "FuzzLinkHeader", dependencies: ["FuzzSupport", .product(name: "HubClient", package: root)]),
        .executableTarget(name: "FuzzRangeHeaders", dependencies: ["FuzzSupport", .product(name: "HubClient", package: root), .product(name: "Transfer", package: root)]),
        .executableTarget(name: "FuzzManifest", dependencies: ["FuzzSupport", .product(name: "HubTypes", package: root), .product(name: "ModelCache", package: root)]),
        .executableTarget(name: "FuzzShardIndex", dependencies: ["FuzzSupport", .product(name: "ModelCache", package: root)]),
        .executableTarget(name: "FuzzSidecar", dependencies: ["FuzzSupport", .product(name: "HubTypes", package: root), .product(name: "ModelCache", package: root)]),
        .executableTarget(name: "FuzzSpoolRecords", dependencies: ["FuzzSupport", .product(name: "HubTypes", package: root), .product(name: "Spool", package: root)]),
        .executableTarget(name: "FuzzXetReconstruction", dependencies: ["FuzzSupport", .product(name: "Xet", package: root)]),
        .executableTarget(name: "FuzzXetChunks", dependencies: ["FuzzSupport", .product(name: "Xet", package: root)]),
        .executableTarget(name: "FuzzNames", dependencies: ["FuzzSupport", .product(name: "HubTypes", package: root), .product(name: "ModelCache", package: root), .product(name: "SharedFiles", package: root), .product(name: "Spool", package: root)]),
    ],
    swiftLanguageModes: [.v6]
)
