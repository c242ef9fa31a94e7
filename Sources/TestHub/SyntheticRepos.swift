// SyntheticRepos - small stand-ins for the catalog's repos, with their real file layout (CoreML
// bundles as directories, shards with a valid index where a model is sharded, tokenizer and
// config files, plus files no model selects), for the test Hub and demos.
import Foundation

/// A synthetic repo: files of random bytes (`sizes`) and files whose bytes matter (`contents`:
/// shard indexes, whose `weight_map` must name the shards).
public struct SyntheticRepo: Sendable {
    public let repo: String
    /// Repo path → size, for files whose content does not matter (write with `TestHub.generateRepo`).
    public let sizes: [String: Int]
    /// Repo path → exact bytes (write with `TestHub.writeRepo`).
    public let contents: [String: Data]

    /// Every repo path → its size.
    public var layout: [String: Int] {
        sizes.merging(contents.mapValues(\.count)) { a, _ in a }
    }
}

extension SyntheticRepo {
    /// The synthetic stand-in for a model catalog repo (nil for a repo the catalog does not use).
    public static func named(_ repo: String) -> SyntheticRepo? {
        guard let files = SyntheticFiles.layouts[repo] else { return nil }
        var sizes: [String: Int] = [:]
        var contents: [String: Data] = [:]
        for (path, file) in files {
            switch file {
            case .random(let size): sizes[path] = size
            case .bytes(let data): contents[path] = data
            }
        }
        return SyntheticRepo(repo: repo, sizes: sizes, contents: contents)
    }
}

extension SyntheticRepo {
    /// The repo `speech demo` downloads.
    public static let demoRepo = "demo/Speech-Demo-Model"

    /// `demoRepo` of about `size` bytes of weights: four shards named by their index, a
    /// consolidated copy the index does not name (a sharded download never fetches it), a config
    /// and a tokenizer file.
    public static func demo(size: Int) -> SyntheticRepo {
        let shard = max(1, size / 4)
        var sizes = ["model.safetensors": shard * 4]
        for i in 1...4 { sizes["model-0000\(i)-of-00004.safetensors"] = shard }
        let weightMap = (1...4).map { "\"layer\($0).weight\": \"model-0000\($0)-of-00004.safetensors\"" }.joined(separator: ", ")
        return SyntheticRepo(repo: demoRepo, sizes: sizes, contents: [
            "model.safetensors.index.json": Data("{\"metadata\": {}, \"weight_map\": {\(weightMap)}}".utf8),
            "config.json": Data("{\"model_type\": \"demo\"}".utf8),
            "tokenizer/vocab.json": Data("{\"a\": 0, \"b\": 1}".utf8),
        ])
    }
}

enum SyntheticFile: Sendable {
    case random(Int)
    case bytes(Data)
}

enum SyntheticFiles {
    typealias Files = [String: SyntheticFile]

    /// Files every Hub repo has and no model loads.
    static let repoFiles: Files = [".gitattributes": .random(1_519), "README.md": .random(2_048)]

    /// A compiled CoreML model: a directory.
    static func mlmodelc(_ name: String, weights: Int = 24_576) -> Files {
        [
            "\(name).mlmodelc/coremldata.bin": .random(640),
            "\(name).mlmodelc/metadata.json": .random(1_200),
            "\(name).mlmodelc/model.mil": .random(6_000),
            "\(name).mlmodelc/analytics/coremldata.bin": .random(243),
            "\(name).mlmodelc/weights/weight.bin": .random(weights),
        ]
    }

    /// A CoreML package: a directory with a manifest, the model spec and its weights.
    static func mlpackage(_ name: String, weights: Int = 24_576) -> Files {
        [
            "\(name).mlpackage/Manifest.json": .random(617),
            "\(name).mlpackage/Data/com.apple.CoreML/model.mlmodel": .random(9_000),
            "\(name).mlpackage/Data/com.apple.CoreML/weights/weight.bin": .random(weights),
        ]
    }

    /// `count` shards `<prefix>-0000i-of-0000n.safetensors` and the index that names them.
    static func sharded(_ prefix: String = "model", count: Int, shardSize: Int = 40_000) -> Files {
        var files: Files = [:]
        var map: [String] = []
        for i in 1...count {
            let shard = "\(prefix)-\(padded(i))-of-\(padded(count)).safetensors"
            files[shard] = .random(shardSize + i * 1_000)
            map.append("\"layers.\(i - 1).weight\": \"\(shard)\"")
            map.append("\"layers.\(i - 1).scales\": \"\(shard)\"")
        }
        let total = (1...count).reduce(0) { $0 + shardSize + $1 * 1_000 }
        let json = "{\"metadata\": {\"total_size\": \(total)}, \"weight_map\": {\(map.joined(separator: ", "))}}"
        files["\(prefix).safetensors.index.json"] = .bytes(Data(json.utf8))
        return files
    }

    /// `7` → `00007`, as Hub shard names write it.
    static func padded(_ n: Int) -> String {
        let digits = String(n)
        return String(repeating: "0", count: max(0, 5 - digits.count)) + digits
    }

    static let qwen3Tokenizer: Files = [
        "vocab.json": .random(27_000), "merges.txt": .random(16_000), "tokenizer_config.json": .random(4_000),
    ]

    static func merge(_ parts: Files...) -> Files {
        parts.reduce(into: Files()) { $0.merge($1) { a, _ in a } }
    }

    static let layouts: [String: Files] = [
        "aufklarer/Qwen3-ASR-0.6B-MLX-4bit": merge(repoFiles, qwen3Tokenizer, [
            "config.json": .random(3_000), "model.safetensors": .random(60_000),
            "generation_config.json": .random(200), "preprocessor_config.json": .random(300),
        ]),
        "aufklarer/Qwen3-ASR-1.7B-MLX-8bit": merge(repoFiles, qwen3Tokenizer, sharded(count: 2), [
            "config.json": .random(3_000), "preprocessor_config.json": .random(300),
        ]),
        "aufklarer/Parakeet-TDT-v3-CoreML-INT8-30s": merge(repoFiles,
            mlmodelc("encoder", weights: 50_000), mlmodelc("decoder"), mlmodelc("joint"),
            mlmodelc("preprocessor"), ["config.json": .random(900), "vocab.json": .random(12_000)]),
        "aufklarer/Qwen3-ASR-CoreML": merge(repoFiles,
            mlmodelc("encoder"), mlmodelc("embedding"), mlmodelc("decoder", weights: 40_000),
            ["config.json": .random(400)]),
        "aufklarer/Kokoro-82M-CoreML": merge(repoFiles,
            mlmodelc("kokoro_5s", weights: 40_000), mlmodelc("G2PEncoder"), mlmodelc("G2PDecoder"), [
                "vocab_index.json": .random(2_000), "g2p_vocab.json": .random(1_500),
                "us_gold.json": .random(30_000), "us_silver.json": .random(30_000), "config.json": .random(500),
                "voices/af_heart.json": .random(5_000), "voices/am_adam.json": .random(5_000),
                "voices/bf_emma.json": .random(5_000),
            ]),
        "aufklarer/Qwen3-TTS-12Hz-1.7B-Base-MLX-bf16": merge(repoFiles, qwen3Tokenizer, sharded(count: 3), [
            "config.json": .random(5_000), "generation_config.json": .random(300),
        ]),
        "Qwen/Qwen3-TTS-Tokenizer-12Hz": merge(repoFiles, [
            "config.json": .random(2_500), "configuration.json": .random(80),
            "preprocessor_config.json": .random(300), "model.safetensors": .random(50_000),
        ]),
        "aufklarer/Qwen3-TTS-CoreML": merge(repoFiles,
            mlmodelc("TextProjector"), mlmodelc("CodeEmbedder"), mlmodelc("MultiCodeEmbedder"),
            mlmodelc("CodeDecoder", weights: 40_000), mlmodelc("MultiCodeDecoder"), mlmodelc("SpeechDecoder"), [
                "config.json": .random(700), "vocab.json": .random(27_000), "merges.txt": .random(16_000),
                "speaker_embedding.npy": .random(4_224), "tts_pad_embed.npy": .random(4_224),
                "tts_bos_embed.npy": .random(4_224), "tts_eos_embed.npy": .random(4_224),
            ]),
        "aufklarer/CosyVoice3-0.5B-MLX-bf16": merge(repoFiles, qwen3Tokenizer, [
            "config.json": .random(1_000), "llm.safetensors": .random(60_000),
            "flow.safetensors": .random(40_000), "hifigan.safetensors": .random(20_000),
        ]),
        "aufklarer/PersonaPlex-7B-MLX-4bit": merge(repoFiles, [
            "config.json": .random(1_500), "temporal.safetensors": .random(70_000),
            "depformer.safetensors": .random(30_000), "embeddings.safetensors": .random(20_000),
            "mimi.safetensors": .random(25_000), "tokenizer_spm_32k_3.model": .random(8_000),
            "voices/NATF0.safetensors": .random(3_000), "voices/NATM0.safetensors": .random(3_000),
            "voices/VARF1.safetensors": .random(3_000),
        ]),
        "aufklarer/Silero-VAD-v6.2.1-MLX": merge(repoFiles, [
            "config.json": .random(300), "model.safetensors": .random(12_000),
        ]),
        "aufklarer/Pyannote-Segmentation-MLX": merge(repoFiles, [
            "config.json": .random(400), "model.safetensors": .random(20_000),
        ]),
        "aufklarer/FireRedVAD-CoreML": merge(repoFiles, mlmodelc("fireredvad"), [
            "config.json": .random(300), "cmvn.json": .random(3_000),
        ]),
        "aufklarer/Smart-Turn-v3.2-CoreML": merge(repoFiles, mlmodelc("smart_turn", weights: 30_000), [
            "config.json": .random(220),
        ]),
        "aufklarer/WeSpeaker-ResNet34-LM-MLX": merge(repoFiles, [
            "config.json": .random(300), "model.safetensors": .random(30_000),
        ]),
        "aufklarer/ReDimNet2-B6-CoreML": merge(repoFiles, mlmodelc("ReDimNet2B6"), [
            "config.json": .random(260),
        ]),
        "aufklarer/DeepFilterNet3-CoreML": merge(repoFiles, mlpackage("DeepFilterNet3"), [
            "auxiliary.npz": .random(9_000), "config.json": .random(400),
        ]),
        "aufklarer/LocalVQE-v1.4-AEC-200K-CoreML": merge(repoFiles, mlmodelc("LocalVQEAECResidualMask"), [
            "config.json": .random(500), "LocalVQEAECFrontend.npz": .random(6_000),
        ]),
        "aufklarer/Sortformer-Diarization-CoreML": merge(repoFiles, mlmodelc("Sortformer", weights: 40_000), [
            "config.json": .random(600),
        ]),
        "aufklarer/Pyannote-Community-1-CoreML": merge(repoFiles, mlmodelc("segmentation"), mlmodelc("embedding"), [
            "config.json": .random(900), "plda.safetensors": .random(10_000),
        ]),
        "aufklarer/Qwen3.5-0.8B-Chat-CoreML": merge(repoFiles,
            prefixed("int8/", mlpackage("embedding")), prefixed("int8/", mlpackage("decoder", weights: 40_000)), [
                "config.json": .random(300), "int8/tokenizer.json": .random(30_000),
                "int8/tokenizer_config.json": .random(3_000), "int8/chat_config.json": .random(800),
            ]),
        "aufklarer/Qwen3.5-0.8B-Chat-MLX": merge(repoFiles, [
            "int4/model.safetensors": .random(40_000), "int4/config.json": .random(1_500),
            "int4/tokenizer.json": .random(30_000), "int4/tokenizer_config.json": .random(3_000),
            "int8/model.safetensors": .random(70_000), "int8/config.json": .random(1_500),
            "int8/tokenizer.json": .random(30_000), "int8/tokenizer_config.json": .random(3_000),
        ]),
    ]

    static func prefixed(_ prefix: String, _ files: Files) -> Files {
        Dictionary(uniqueKeysWithValues: files.map { (prefix + $0.key, $0.value) })
    }
}
