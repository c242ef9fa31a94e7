// The model catalog: every supported model downloads by name from a synthetic repo with its real
// layout, loads again offline with no request, and a partial model is reported missing.
import Foundation
import HubTypes
import ModelCache
import SpeechFetch
import TestHub
@testable import TestSupport
import XCTest

final class CatalogTests: HubTestCase {
    /// The "Supported Models" table of the cache-and-offline page, in order.
    let table = [
        "Qwen3ASRModel", "ParakeetASRModel", "CoreMLASRModel", "KokoroTTSModel", "Qwen3TTSModel",
        "Qwen3TTSCoreMLModel", "CosyVoiceTTSModel", "PersonaPlexModel", "SileroVADModel", "PyannoteVADModel",
        "FireRedVADModel", "SmartTurnModel", "WeSpeakerModel", "ReDimNet2SpeakerModel", "SpeechEnhancer",
        "LocalVQEEchoCanceller", "SortformerDiarizer", "Community1DiarizationPipeline",
        "PyannoteDiarizationPipeline", "Qwen35CoreMLChat", "Qwen35MLXChat",
    ]

    /// Puts the synthetic stand-ins of every repo `entry` needs on the test Hub.
    func publish(_ entry: CatalogEntry) throws {
        for synthetic in entry.repos.compactMap(SyntheticRepo.named) {
            try TestHub.generateRepo(root: root, repo: synthetic.repo, files: synthetic.sizes)
            try TestHub.writeRepo(root: root, repo: synthetic.repo, files: synthetic.contents)
        }
    }

    /// The files of a component's synthetic repo that its selection picks.
    func expectedFiles(_ component: ModelComponent) -> [String] {
        let layout = SyntheticRepo.named(component.repo)?.layout ?? [:]
        let selection = FileSelection(component.include)
        return layout.keys.filter { selection.matches($0) }.sorted()
    }

    func loadByName(_ name: String, cacheDir: URL, offline: Bool? = nil) async throws -> PretrainedModel {
        let entry = try XCTUnwrap(ModelCatalog.find(name), "no catalog entry for \(name)")
        let downloader = self.downloader()
        if entry.variant == "large" {
            return try await Qwen3ASRModel.fromPretrained(variant: .large, cacheDir: cacheDir, offlineMode: offline,
                                                          downloader: downloader)
        }
        let type = try XCTUnwrap(ModelCatalog.modelType(named: entry.name))
        if type == PyannoteDiarizationPipeline.self {
            return try await PyannoteDiarizationPipeline.fromPretrained(cacheBaseDir: cacheDir, offlineMode: offline,
                                                                        downloader: downloader)
        }
        let pretrained = try XCTUnwrap(type as? any PretrainedModelType.Type, "\(entry.name) has no fromPretrained(cacheDir:)")
        return try await pretrained.fromPretrained(cacheDir: cacheDir, offlineMode: offline, downloader: downloader)
    }

    // MARK: - The catalog

    func testCatalogIsTheSupportedModelsTable() throws {
        XCTAssertEqual(ModelCatalog.entries.map(\.name), table)
        XCTAssertEqual(ModelCatalog.modelTypes.map { $0.catalogEntry.name }, table)
        var aliases = Set<String>()
        for entry in ModelCatalog.all {
            XCTAssertFalse(entry.aliases.isEmpty, entry.displayName)
            for alias in entry.aliases {
                XCTAssertEqual(alias, alias.lowercased())
                XCTAssertTrue(aliases.insert(alias).inserted, "alias \(alias) used twice")
                XCTAssertEqual(ModelCatalog.find(alias.uppercased())?.displayName, entry.displayName)
            }
            if entry.variant == nil {
                XCTAssertEqual(ModelCatalog.find(entry.name.uppercased())?.name, entry.name)
            }
            for component in entry.components {
                XCTAssertNoThrow(try RepoID(component.repo))
                let synthetic = try XCTUnwrap(SyntheticRepo.named(component.repo), component.repo)
                // Every pattern picks something of the real layout, and the layout has files no
                // model selects (README.md), so the selection is exercised.
                for pattern in component.include {
                    XCTAssertTrue(synthetic.layout.keys.contains { FileSelection.glob(pattern, matches: $0) },
                                  "\(entry.displayName): \(pattern) matches nothing in \(component.repo)")
                }
                XCTAssertFalse(expectedFiles(component).contains("README.md"))
            }
        }
        XCTAssertEqual(ModelCatalog.find("qwen3-asr-large")?.repo, "aufklarer/Qwen3-ASR-1.7B-MLX-8bit")
        XCTAssertEqual(ModelCatalog.find("Qwen3ASRModel")?.repo, "aufklarer/Qwen3-ASR-0.6B-MLX-4bit")
        XCTAssertEqual(ModelCatalog.find("qwen3asrmodel:large")?.variant, "large")
        XCTAssertEqual(ModelCatalog.find(" Kokoro ")?.name, "KokoroTTSModel")
        XCTAssertNil(ModelCatalog.find("no-such-model"))
        XCTAssertNil(ModelCatalog.find(""))
    }

    func testShardIndexesOfTheSyntheticReposNameTheirShards() throws {
        for entry in ModelCatalog.all {
            for synthetic in entry.repos.compactMap(SyntheticRepo.named) {
                for (path, data) in synthetic.contents where ShardIndex.isIndexPath(path) {
                    let index = try ShardIndex(path: path, data: data)
                    XCTAssertFalse(index.shards.isEmpty)
                    XCTAssertTrue(index.shards.allSatisfy { synthetic.sizes[$0] != nil }, "\(synthetic.repo): \(path)")
                }
            }
        }
    }

    // MARK: - Every model, online then offline

    func testEveryModelDownloadsByNameThenLoadsOfflineWithZeroRequests() async throws {
        for entry in ModelCatalog.all { try publish(entry) }
        for entry in ModelCatalog.all {
            let name = entry.aliases[0]
            let dir = temp.appendingPathComponent("by-name/\(entry.displayName)")
            let online = try await loadByName(name, cacheDir: dir)
            XCTAssertEqual(online.entry.displayName, entry.displayName)
            XCTAssertEqual(online.components.map(\.repo), entry.repos, name)
            for (loaded, component) in zip(online.components, entry.components) {
                XCTAssertEqual(loaded.files.sorted(), expectedFiles(component), "\(name): \(component.repo)")
                for file in loaded.files {
                    XCTAssertTrue(FileManager.default.fileExists(atPath: loaded.directory.appendingPathComponent(file).path),
                                  "\(name): \(file) missing in \(loaded.directory.path)")
                }
                XCTAssertFalse(FileManager.default.fileExists(atPath: loaded.directory.appendingPathComponent("README.md").path))
            }
            if entry.name != "PyannoteDiarizationPipeline" {
                XCTAssertEqual(online.directory.standardizedFileURL, dir.standardizedFileURL)
            }

            let before = hub.totalRequests
            let offline = try await loadByName(name, cacheDir: dir, offline: true)
            XCTAssertEqual(hub.totalRequests, before, "\(name): offline load made requests")
            XCTAssertEqual(offline.components.map(\.directory), online.components.map(\.directory))
            XCTAssertEqual(offline.components.map { $0.files.sorted() }, online.components.map { $0.files.sorted() })
            XCTAssertTrue(offline.fetched.isEmpty)
            XCTAssertTrue(ModelCatalog.isCached(entry, cacheDir: entry.name == "PyannoteDiarizationPipeline" ? nil : dir,
                                                cacheBaseDir: entry.name == "PyannoteDiarizationPipeline" ? dir : nil,
                                                downloader: downloader()), name)
            XCTAssertEqual(hub.totalRequests, before)
        }
    }

    func testOfflineBeforeAnyDownloadIsACacheMiss() async throws {
        try publish(KokoroTTSModel.catalogEntry)
        let dir = temp.appendingPathComponent("kokoro")
        do {
            _ = try await KokoroTTSModel.fromPretrained(cacheDir: dir, offlineMode: true, downloader: downloader())
            XCTFail("offline load of an empty directory succeeded")
        } catch CacheError.cacheMiss(let repo, _, let missing, _) {
            XCTAssertEqual(repo, "aufklarer/Kokoro-82M-CoreML")
            XCTAssertTrue(missing.paths.contains("voices/af_heart.json"))
        }
        XCTAssertEqual(hub.totalRequests, 0)
        XCTAssertFalse(ModelCatalog.isCached(KokoroTTSModel.catalogEntry, cacheDir: dir, downloader: downloader()))
    }

    // MARK: - Partial models

    func testPartialShardedModelIsReportedMissingOffline() async throws {
        try publish(Qwen3TTSModel.catalogEntry)
        let modelDir = temp.appendingPathComponent("tts"), tokenizerDir = temp.appendingPathComponent("tts-tokenizer")
        let online = try await Qwen3TTSModel.fromPretrained(cacheDir: modelDir, tokenizerCacheDir: tokenizerDir,
                                                            downloader: downloader())
        XCTAssertEqual(online.component(.tokenizer)?.directory.standardizedFileURL, tokenizerDir.standardizedFileURL)
        XCTAssertTrue(online.files.contains("model.safetensors.index.json"))
        XCTAssertEqual(online.files.filter { $0.hasSuffix(".safetensors") }.count, 3)
        _ = try await Qwen3TTSModel.fromLocal(modelDirectory: modelDir, tokenizerDirectory: tokenizerDir)

        let requests = hub.totalRequests
        try FileManager.default.removeItem(at: modelDir.appendingPathComponent("model-00002-of-00003.safetensors"))
        do {
            _ = try await Qwen3TTSModel.fromPretrained(cacheDir: modelDir, tokenizerCacheDir: tokenizerDir,
                                                       offlineMode: true, downloader: downloader())
            XCTFail("a model missing a shard its index names was loaded")
        } catch CacheError.cacheMiss(_, _, let missing, _) {
            XCTAssertEqual(missing, ["model-00002-of-00003.safetensors"])
        }
        do {
            _ = try await Qwen3TTSModel.fromLocal(modelDirectory: modelDir, tokenizerDirectory: tokenizerDir)
            XCTFail("fromLocal accepted a partial model")
        } catch CacheError.cacheMiss(_, _, let missing, _) {
            XCTAssertEqual(missing, ["model-00002-of-00003.safetensors"])
        }
        XCTAssertEqual(ModelCatalog.missingFiles(Qwen3TTSModel.catalogEntry, cacheDir: modelDir,
                                                 componentDirectories: [.tokenizer: tokenizerDir]),
                       ["aufklarer/Qwen3-TTS-12Hz-1.7B-Base-MLX-bf16": ["model-00002-of-00003.safetensors"]])
        XCTAssertEqual(hub.totalRequests, requests)

        // Online, the missing shard alone is fetched again.
        let repaired = try await Qwen3TTSModel.fromPretrained(cacheDir: modelDir, tokenizerCacheDir: tokenizerDir,
                                                              downloader: downloader())
        XCTAssertEqual(repaired.fetched, ["model-00002-of-00003.safetensors"])
    }

    func testFromLocalJudgesDirectoriesWithoutManifestByTheirFiles() async throws {
        try publish(Qwen3TTSModel.catalogEntry)
        let modelDir = temp.appendingPathComponent("tts"), tokenizerDir = temp.appendingPathComponent("tts-tokenizer")
        _ = try await Qwen3TTSModel.fromPretrained(cacheDir: modelDir, tokenizerCacheDir: tokenizerDir, downloader: downloader())
        // An app's own copies: the files only, no bookkeeping.
        let shippedModel = temp.appendingPathComponent("shipped/model"), shippedTokenizer = temp.appendingPathComponent("shipped/tokenizer")
        try FileManager.default.createDirectory(at: shippedModel.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: modelDir, to: shippedModel)
        try FileManager.default.copyItem(at: tokenizerDir, to: shippedTokenizer)
        for dir in [shippedModel, shippedTokenizer] {
            try FileManager.default.removeItem(at: dir.appendingPathComponent(ModelLayout.manifest))
        }
        let requests = hub.totalRequests
        let local = try await Qwen3TTSModel.fromLocal(modelDirectory: shippedModel, tokenizerDirectory: shippedTokenizer)
        XCTAssertEqual(local.directory.standardizedFileURL, shippedModel.standardizedFileURL)
        XCTAssertTrue(local.files.contains("model-00003-of-00003.safetensors"))

        try FileManager.default.removeItem(at: shippedModel.appendingPathComponent("model-00003-of-00003.safetensors"))
        do {
            _ = try await Qwen3TTSModel.fromLocal(modelDirectory: shippedModel, tokenizerDirectory: shippedTokenizer)
            XCTFail("fromLocal accepted a partial model without a manifest")
        } catch CacheError.cacheMiss(_, _, let missing, _) {
            XCTAssertEqual(missing, ["model-00003-of-00003.safetensors"])
        }
        try FileManager.default.removeItem(at: shippedTokenizer.appendingPathComponent("model.safetensors"))
        do {
            _ = try await Qwen3TTSModel.fromLocal(modelDirectory: modelDir, tokenizerDirectory: shippedTokenizer)
            XCTFail("fromLocal accepted a tokenizer without weights")
        } catch CacheError.cacheMiss(let repo, _, _, _) {
            XCTAssertEqual(repo, "Qwen/Qwen3-TTS-Tokenizer-12Hz")
        }
        XCTAssertEqual(hub.totalRequests, requests)
    }

    // MARK: - Models of several repos

    func testPyannotePipelineLaysOutItsModelsUnderTheBase() async throws {
        let entry = PyannoteDiarizationPipeline.catalogEntry
        try publish(entry)
        let base = temp.appendingPathComponent("app-models")
        let pipeline = try await PyannoteDiarizationPipeline.fromPretrained(cacheBaseDir: base, downloader: downloader())
        let expected: [(ComponentRole, String)] = [
            (.segmentation, "aufklarer/Pyannote-Segmentation-MLX"),
            (.embedding, "aufklarer/WeSpeaker-ResNet34-LM-MLX"),
            (.vad, "aufklarer/Silero-VAD-v6.2.1-MLX"),
        ]
        XCTAssertEqual(pipeline.components.map(\.role), expected.map(\.0))
        for (role, repo) in expected {
            let component = try XCTUnwrap(pipeline.component(role))
            XCTAssertEqual(component.directory.standardizedFileURL,
                           base.appendingPathComponent("models/\(repo)").standardizedFileURL)
            XCTAssertTrue(FileManager.default.fileExists(atPath: component.directory.appendingPathComponent("model.safetensors").path))
        }
        XCTAssertEqual(pipeline.directory, pipeline.component(.segmentation)?.directory)

        let requests = hub.totalRequests
        let offline = try await PyannoteDiarizationPipeline.fromPretrained(cacheBaseDir: base, offlineMode: true,
                                                                           downloader: downloader())
        XCTAssertEqual(offline.components.count, 3)
        XCTAssertEqual(hub.totalRequests, requests)

        // Without the VAD filter the third model is neither needed nor checked.
        try FileManager.default.removeItem(at: base.appendingPathComponent("models/aufklarer/Silero-VAD-v6.2.1-MLX"))
        let withoutVAD = try await PyannoteDiarizationPipeline.fromPretrained(cacheBaseDir: base, offlineMode: true,
                                                                              includeVAD: false, downloader: downloader())
        XCTAssertEqual(withoutVAD.components.map(\.role), [.segmentation, .embedding])
        XCTAssertTrue(ModelCatalog.isCached(entry, cacheBaseDir: base, downloader: downloader()))
        do {
            _ = try await PyannoteDiarizationPipeline.fromPretrained(cacheBaseDir: base, offlineMode: true,
                                                                     downloader: downloader())
            XCTFail("the pipeline loaded without its VAD model")
        } catch CacheError.cacheMiss(let repo, _, _, _) {
            XCTAssertEqual(repo, "aufklarer/Silero-VAD-v6.2.1-MLX")
        }
        XCTAssertEqual(hub.totalRequests, requests)
    }

    func testCoreMLASRTakesOnlyTheTokenizerFromTheSmallMLXRepo() async throws {
        try publish(CoreMLASRModel.catalogEntry)
        let dir = temp.appendingPathComponent("coreml-asr")
        let model = try await CoreMLASRModel.fromPretrained(cacheDir: dir, downloader: downloader())
        let tokenizer = try XCTUnwrap(model.component(.tokenizer))
        XCTAssertEqual(tokenizer.repo, "aufklarer/Qwen3-ASR-0.6B-MLX-4bit")
        XCTAssertEqual(tokenizer.directory.standardizedFileURL,
                       downloader().defaultCacheBase.appendingPathComponent("models/aufklarer/Qwen3-ASR-0.6B-MLX-4bit").standardizedFileURL)
        XCTAssertEqual(tokenizer.files.sorted(), ["merges.txt", "tokenizer_config.json", "vocab.json"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: tokenizer.directory.appendingPathComponent("model.safetensors").path))
        XCTAssertEqual(hub.requests(for: "aufklarer/Qwen3-ASR-0.6B-MLX-4bit/model.safetensors"), 0)
        XCTAssertTrue(model.files.contains("decoder.mlmodelc/weights/weight.bin"))
    }

    func testBlockingDownloadReportsProgressPerRepo() throws {
        try publish(Qwen3TTSModel.catalogEntry)
        let base = temp.appendingPathComponent("blocking")
        let log = ModelProgressLog()
        let model = try ModelCatalog.downloadBlocking(Qwen3TTSModel.catalogEntry, cacheBaseDir: base,
                                                      progress: { log.add($0) }, downloader: downloader())
        XCTAssertEqual(model.components.map(\.directory.standardizedFileURL), [
            base.appendingPathComponent("models/aufklarer/Qwen3-TTS-12Hz-1.7B-Base-MLX-bf16").standardizedFileURL,
            base.appendingPathComponent("models/Qwen/Qwen3-TTS-Tokenizer-12Hz").standardizedFileURL,
        ])
        let events = log.all
        XCTAssertEqual(Set(events.map(\.componentIndex)), [0, 1])
        XCTAssertTrue(events.allSatisfy { $0.componentCount == 2 && $0.model == "Qwen3TTSModel" })
        XCTAssertEqual(events.last?.fraction ?? 0, 1, accuracy: 1e-9)
    }
}

/// Collects model progress events from the engine thread.
final class ModelProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [ModelProgress] = []
    func add(_ p: ModelProgress) { lock.withLock { events.append(p) } }
    var all: [ModelProgress] { lock.withLock { events } }
}
