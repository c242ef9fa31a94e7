// swift-tools-version:6.0
// speech-fetch: the Linux downloader and shared model cache for speech models on the Hugging Face Hub.
// No outside Swift package: the toolchain's Foundation/Dispatch/XCTest and Debian's C libraries only.
import PackageDescription

let package = Package(
    name: "speech-fetch",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "SpeechFetch", targets: ["SpeechFetch"]),
        .library(name: "TestHub", targets: ["TestHub"]),
        // The layers the fuzz targets (Fuzzing/Package.swift) reach into; nothing else uses them.
        .library(name: "SharedFiles", targets: ["SharedFiles"]),
        .library(name: "HubTypes", targets: ["HubTypes"]),
        .library(name: "HubClient", targets: ["HubClient"]),
        .library(name: "ModelCache", targets: ["ModelCache"]),
        .library(name: "Transfer", targets: ["Transfer"]),
        .library(name: "Spool", targets: ["Spool"]),
        .library(name: "Digest", targets: ["Digest"]),
        .library(name: "Xet", targets: ["Xet"]),
        .executable(name: "speech", targets: ["speech"]),
        .executable(name: "speech-fetchd", targets: ["speech-fetchd"]),
        .executable(name: "speech-testhub", targets: ["speech-testhub"]),
    ],
    targets: [
        // C shims: the only places that see raw C APIs.
        // CLoader opens a library at its first use (dlopen) for CCurl and CCrypto.
        .target(name: "CLoader", linkerSettings: [.linkedLibrary("dl")]),
        // libcurl's headers (libcurl4-openssl-dev) at build time; the library itself is
        // loaded at its first use (Sources/CCurl/include/CCurl.h says why).
        .target(name: "CCurl", dependencies: ["CLoader"]),
        // libcrypto likewise: OpenSSL's headers (libssl-dev) at build time, the library opened at
        // the first hasher (Sources/CCrypto/include/CCrypto.h).
        .target(name: "CCrypto", dependencies: ["CLoader"]),
        .systemLibrary(name: "CInotify",
                       providers: [.apt(["libinotifytools0-dev"])]),
        .systemLibrary(name: "CFileOps"),
        // BLAKE3 in our own portable C (plus an AVX2 chunk loop chosen by cpuid): Debian 12 has no
        // C library for it, and Xet names everything by keyed BLAKE3 (docs/xet.md).
        .target(name: "CBlake3"),
        // liblz4's frame format, for Xet's compressed chunks.
        .systemLibrary(name: "CLZ4", providers: [.apt(["liblz4-dev"])]),

        // The filesystem below every Swift layer: three-way reads of shared state, atomic writes,
        // trees, disk space, filesystem kind, whole reads and writes, boot identity, leases.
        .target(name: "SharedFiles", dependencies: ["CFileOps"]),

        // One thin Swift wrapper per C library.
        .target(name: "Curl", dependencies: ["CCurl"]),
        .target(name: "Digest", dependencies: ["CCrypto", "SharedFiles"]),
        .target(name: "FileEvents", dependencies: ["CInotify"]),
        // Xet's format without the network: BLAKE3, chunk/xorb/file hashes and the Merkle tree, the
        // content-defined chunker, chunk headers and compression schemes, xorbs, reconstructions.
        .target(name: "Xet", dependencies: ["CBlake3", "CLZ4"]),

        // The layers of docs/architecture.md, lowest first.
        // The Hub's value types (repo ids, paths, files, snapshots) without the HTTP stack, so
        // that the cache does not link it.
        .target(name: "HubTypes"),
        // Sizes and rates as people write them (`20M`, `500K`): for the engine's rate cap and the
        // command lines, neither of which should need the HTTP stack to read a number.
        .target(name: "ByteUnits"),
        .target(name: "DaemonOptions"),
        .target(name: "HubClient", dependencies: ["Curl", "HubTypes", "Xet"]),
        .target(name: "ModelCache", dependencies: ["ByteUnits", "HubTypes", "Digest", "CFileOps", "SharedFiles"]),
        .target(name: "Transfer", dependencies: ["ByteUnits", "Curl", "HubClient", "HubTypes", "ModelCache", "SharedFiles", "Xet"]),
        .target(name: "Spool", dependencies: ["CFileOps", "Digest", "HubTypes", "ModelCache", "SharedFiles"]),
        // The model catalog's data: the supported models by name, their repos and files (docs/models.md).
        .target(name: "ModelCatalog", dependencies: ["ModelCache"]),
        .target(name: "Daemon", dependencies: ["ByteUnits", "CFileOps", "DaemonOptions", "Digest", "FileEvents", "HubClient", "HubTypes", "ModelCache", "SharedFiles", "Spool", "Transfer"]),
        .target(name: "CacheAdmin", dependencies: ["ByteUnits", "Digest", "HubTypes", "ModelCache", "SharedFiles", "Spool", "Transfer"]),
        .target(name: "SpeechFetch", dependencies: ["ByteUnits", "CacheAdmin", "Curl", "Daemon", "DaemonOptions", "Digest", "HubClient", "HubTypes", "ModelCache", "ModelCatalog", "SharedFiles", "Spool", "Transfer"]),

        // The local stand-in for the Hub (tests, demo, fidelity check).
        .target(name: "TestHub", dependencies: ["Digest", "SharedFiles", "Xet"]),

        // The executables' one argument parser, help and version text, exit codes (docs/cli.md).
        // The executables hand it libcurl's version line; ByteUnits for --max-rate and --max-cache-size.
        // The BuildCommit plugin records the build's commit for `--version` (scripts/build-commit).
        .target(name: "CommandLineKit", dependencies: ["ByteUnits", "DaemonOptions", "SharedFiles"], plugins: ["BuildCommit"]),
        .plugin(name: "BuildCommit", capability: .buildTool()),

        // Thin executables: argument parsing and printing only (Curl for libcurl's version line).
        .executableTarget(name: "speech", dependencies: ["ByteUnits", "CommandLineKit", "Curl", "SpeechFetch", "Daemon", "HubClient", "HubTypes", "ModelCache", "FileEvents", "SharedFiles"]),
        .executableTarget(name: "speech-fetchd", dependencies: ["CommandLineKit", "Curl", "Daemon", "SpeechFetch"]),
        .executableTarget(name: "speech-testhub", dependencies: ["CommandLineKit", "Curl", "TestHub"]),

        // The tests' shared fixtures (docs/architecture.md, "Tests"): a test Hub and a temp cache per
        // test (HubTestCase), real speech-fetchd and speech processes (DaemonTestCase), a tmpfs.
        // A test target without tests that the others depend on: built only with the tests (it
        // imports XCTest, which `swift build -c release --static-swift-stdlib` cannot), in no product.
        .testTarget(name: "TestSupport", dependencies: ["Digest", "ModelCache", "SpeechFetch", "TestHub"]),

        // One test target per module it tests; SpeechCLITests drives the executables.
        .testTarget(name: "ByteUnitsTests", dependencies: ["ByteUnits"]),
        .testTarget(name: "DigestTests", dependencies: ["Digest"]),
        .testTarget(name: "FileEventsTests", dependencies: ["FileEvents"]),
        .testTarget(name: "HubClientTests", dependencies: ["HubClient", "HubTypes", "TestHub"]),
        .testTarget(name: "ModelCacheTests", dependencies: ["Digest", "HubTypes", "ModelCache", "SharedFiles", "TestSupport"]),
        .testTarget(name: "TransferTests", dependencies: ["CacheAdmin", "Curl", "Daemon", "Digest", "HubClient", "HubTypes", "ModelCache", "SpeechFetch", "Spool", "TestHub", "TestSupport", "Transfer", "Xet"]),
        .testTarget(name: "SpoolTests", dependencies: ["CacheAdmin", "Daemon", "Digest", "HubTypes", "ModelCache", "SharedFiles", "SpeechFetch", "Spool", "TestHub", "TestSupport"]),
        .testTarget(name: "DaemonTests", dependencies: ["Curl", "Daemon", "Digest", "HubClient", "HubTypes", "ModelCache", "SharedFiles", "SpeechFetch", "Spool", "TestHub", "TestSupport"]),
        .testTarget(name: "CacheAdminTests", dependencies: ["CacheAdmin", "Digest", "HubTypes", "ModelCache", "SharedFiles", "SpeechFetch", "Spool", "TestHub", "TestSupport"]),
        .testTarget(name: "SpeechFetchTests", dependencies: ["Daemon", "Digest", "HubClient", "HubTypes", "ModelCache", "SpeechFetch", "TestHub", "TestSupport"]),
        .testTarget(name: "TestHubTests", dependencies: ["Digest", "TestHub", "Xet"]),
        // Data/: the official BLAKE3 test vectors, read by path.
        .testTarget(name: "XetTests", dependencies: ["TestHub", "Xet"], exclude: ["Data"]),
        .testTarget(name: "CommandLineKitTests", dependencies: ["CommandLineKit"]),
        .testTarget(name: "SpeechCLITests", dependencies: ["ModelCache", "SpeechFetch", "TestHub", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
