// CatalogEntries - the data of the catalog: repo ids, file selections, sizes and their sources.
// Each selection is what the model's loader in the public speech-swift project opens (its
// `fromPretrained`), written as globs for HuggingFaceDownloader. docs/models.md explains each row.
import Foundation

extension CatalogEntry {
    private static let speechSwift = "soniqo/speech-swift"

    /// The tokenizer files of the Qwen3 MLX bundles (`vocab.json` is what the loaders read).
    static let qwen3TokenizerFiles = ["vocab.json", "merges.txt", "tokenizer_config.json"]

    /// MLX weights: every `.safetensors` file and, when the repo is sharded, its
    /// `*.safetensors.index.json` (which then decides the shards). One glob for both, so a
    /// consolidated repo without an index still satisfies it.
    static let mlxWeights = "*.safetensors*"

    // MARK: - Speech recognition

    public static let qwen3ASR = CatalogEntry(
        name: "Qwen3ASRModel", aliases: ["qwen3-asr", "qwen3", "qwen3-asr-0.6b"], task: "asr",
        summary: "Qwen3-ASR 0.6B, MLX 4-bit: speech to text, 52 languages",
        components: [ModelComponent(role: .model, repo: "aufklarer/Qwen3-ASR-0.6B-MLX-4bit",
                                    include: ["config.json", mlxWeights] + qwen3TokenizerFiles)],
        approximateSize: 680_000_000,
        source: "\(speechSwift) Sources/Qwen3ASR/Qwen3ASR.swift (fromPretrained, ASRModelSize)")

    public static let qwen3ASRLarge = CatalogEntry(
        name: "Qwen3ASRModel", variant: "large", aliases: ["qwen3-asr-large", "qwen3-asr-1.7b", "qwen3-1.7b"],
        task: "asr", summary: "Qwen3-ASR 1.7B, MLX 8-bit: the larger speech-to-text model",
        components: [ModelComponent(role: .model, repo: "aufklarer/Qwen3-ASR-1.7B-MLX-8bit",
                                    include: ["config.json", mlxWeights] + qwen3TokenizerFiles)],
        approximateSize: 3_200_000_000,
        source: "\(speechSwift) Sources/Qwen3ASR/Qwen3ASR.swift (largeModelId, fromPretrained)")

    public static let parakeetASR = CatalogEntry(
        name: "ParakeetASRModel", aliases: ["parakeet", "parakeet-tdt"], task: "asr",
        summary: "Parakeet TDT 0.6B v3, CoreML INT8: speech to text, 25 European languages",
        components: [ModelComponent(role: .model, repo: "aufklarer/Parakeet-TDT-v3-CoreML-INT8-30s", include: [
            "config.json", "vocab.json", "encoder.mlmodelc/**", "decoder.mlmodelc/**", "joint.mlmodelc/**",
        ])],
        approximateSize: 500_000_000,
        source: "\(speechSwift) Sources/ParakeetASR/ParakeetASR.swift (fromPretrained)")

    public static let coreMLASR = CatalogEntry(
        name: "CoreMLASRModel", aliases: ["qwen3-asr-coreml", "qwen3-coreml", "coreml-asr"], task: "asr",
        summary: "Qwen3-ASR on CoreML (encoder, embedding, decoder); tokenizer from the 0.6B MLX repo",
        components: [
            ModelComponent(role: .model, repo: "aufklarer/Qwen3-ASR-CoreML", include: [
                "config.json", "encoder.mlmodelc/**", "embedding.mlmodelc/**", "decoder.mlmodelc/**",
            ]),
            ModelComponent(role: .tokenizer, repo: "aufklarer/Qwen3-ASR-0.6B-MLX-4bit", include: qwen3TokenizerFiles),
        ],
        approximateSize: 180_000_000,
        source: "\(speechSwift) Sources/Qwen3ASR/CoreMLASRModel.swift, CoreMLEncoder.swift, CoreMLTextDecoder.swift")

    // MARK: - Speech synthesis

    public static let kokoroTTS = CatalogEntry(
        name: "KokoroTTSModel", aliases: ["kokoro", "kokoro-82m"], task: "tts",
        summary: "Kokoro 82M, CoreML: text to speech, 10 languages (default voice af_heart)",
        components: [ModelComponent(role: .model, repo: "aufklarer/Kokoro-82M-CoreML", include: [
            "kokoro_5s.mlmodelc/**", "G2PEncoder.mlmodelc/**", "G2PDecoder.mlmodelc/**",
            "vocab_index.json", "g2p_vocab.json", "us_gold.json", "us_silver.json", "voices/af_heart.json",
        ])],
        approximateSize: 170_000_000,
        source: "\(speechSwift) Sources/KokoroTTS/KokoroTTS.swift (fromPretrained)")

    public static let qwen3TTS = CatalogEntry(
        name: "Qwen3TTSModel", aliases: ["qwen3-tts", "qwen3-tts-1.7b"], task: "tts",
        summary: "Qwen3-TTS 12 Hz 1.7B Base, MLX bf16, with the Qwen3-TTS speech tokenizer (codec)",
        components: [
            ModelComponent(role: .model, repo: "aufklarer/Qwen3-TTS-12Hz-1.7B-Base-MLX-bf16",
                           include: ["config.json", mlxWeights] + qwen3TokenizerFiles),
            ModelComponent(role: .tokenizer, repo: "Qwen/Qwen3-TTS-Tokenizer-12Hz", include: ["config.json", mlxWeights]),
        ],
        approximateSize: nil,
        source: "\(speechSwift) Sources/Qwen3TTS/Qwen3TTS.swift (fromPretrained), LocalModelConfiguration.swift")

    public static let qwen3TTSCoreML = CatalogEntry(
        name: "Qwen3TTSCoreMLModel", aliases: ["qwen3-tts-coreml"], task: "tts",
        summary: "Qwen3-TTS on CoreML: six models, special embeddings, tokenizer",
        components: [ModelComponent(role: .model, repo: "aufklarer/Qwen3-TTS-CoreML", include: [
            "config.json", "vocab.json", "merges.txt",
            "TextProjector.mlmodelc/**", "CodeEmbedder.mlmodelc/**", "MultiCodeEmbedder.mlmodelc/**",
            "CodeDecoder.mlmodelc/**", "MultiCodeDecoder.mlmodelc/**", "SpeechDecoder.mlmodelc/**",
            "speaker_embedding.npy", "tts_pad_embed.npy", "tts_bos_embed.npy", "tts_eos_embed.npy",
        ])],
        approximateSize: 1_000_000_000,
        source: "\(speechSwift) Sources/Qwen3TTSCoreML/Qwen3TTSCoreML.swift (fromPretrained)")

    public static let cosyVoiceTTS = CatalogEntry(
        name: "CosyVoiceTTSModel", aliases: ["cosyvoice", "cosyvoice3"], task: "tts",
        summary: "CosyVoice3 0.5B, MLX bf16: LLM, flow matching and HiFi-GAN vocoder",
        components: [ModelComponent(role: .model, repo: "aufklarer/CosyVoice3-0.5B-MLX-bf16", include: [
            "llm.safetensors", "flow.safetensors", "hifigan.safetensors",
        ] + qwen3TokenizerFiles)],
        approximateSize: nil,
        source: "\(speechSwift) Sources/CosyVoiceTTS/CosyVoiceTTS.swift (fromPretrained)")

    // MARK: - Speech to speech

    public static let personaPlex = CatalogEntry(
        name: "PersonaPlexModel", aliases: ["personaplex", "personaplex-7b"], task: "s2s",
        summary: "PersonaPlex 7B, MLX 4-bit: full-duplex speech to speech, voice presets",
        components: [ModelComponent(role: .model, repo: "aufklarer/PersonaPlex-7B-MLX-4bit", include: [
            "config.json", "temporal.safetensors", "depformer.safetensors", "embeddings.safetensors",
            "mimi.safetensors", "voices/*.safetensors", "tokenizer_spm_32k_3.model",
        ])],
        approximateSize: 4_900_000_000,
        source: "\(speechSwift) Sources/PersonaPlex/PersonaPlex.swift (fromPretrained)")

    // MARK: - Voice activity and turns

    public static let sileroVAD = CatalogEntry(
        name: "SileroVADModel", aliases: ["silero", "silero-vad"], task: "vad",
        summary: "Silero VAD v6.2.1, MLX: streaming voice activity detection",
        components: [ModelComponent(role: .model, repo: "aufklarer/Silero-VAD-v6.2.1-MLX", include: ["*.json", mlxWeights])],
        approximateSize: nil,
        source: "\(speechSwift) Sources/SpeechVAD/SileroVAD.swift (fromPretrained, engine .mlx)")

    public static let pyannoteVAD = CatalogEntry(
        name: "PyannoteVADModel", aliases: ["pyannote", "pyannote-vad", "pyannote-segmentation"], task: "vad",
        summary: "Pyannote segmentation 3.0, MLX: VAD and speaker segmentation",
        components: [ModelComponent(role: .model, repo: "aufklarer/Pyannote-Segmentation-MLX", include: ["*.json", mlxWeights])],
        approximateSize: 5_700_000,
        source: "\(speechSwift) Sources/SpeechVAD/DiarizationPipeline.swift (segmentation download)")

    public static let fireRedVAD = CatalogEntry(
        name: "FireRedVADModel", aliases: ["firered", "firered-vad"], task: "vad",
        summary: "FireRedVAD (DFSMN), CoreML: offline voice activity detection, 100+ languages",
        components: [ModelComponent(role: .model, repo: "aufklarer/FireRedVAD-CoreML", include: [
            "config.json", "cmvn.json", "fireredvad.mlmodelc/**",
        ])],
        approximateSize: 1_200_000,
        source: "\(speechSwift) Sources/SpeechVAD/FireRedVAD.swift (fromPretrained)")

    public static let smartTurn = CatalogEntry(
        name: "SmartTurnModel", aliases: ["smart-turn", "smartturn"], task: "turn",
        summary: "Pipecat Smart Turn v3.2, CoreML: end-of-turn detection, 23 languages",
        components: [ModelComponent(role: .model, repo: "aufklarer/Smart-Turn-v3.2-CoreML", include: [
            "config.json", "smart_turn.mlmodelc/**",
        ])],
        approximateSize: 17_000_000,
        source: "speech-swift SpeechVAD module, SmartTurnModel (defaultModelId, fromPretrained) and Tests SmartTurnTests")

    // MARK: - Speakers

    public static let weSpeaker = CatalogEntry(
        name: "WeSpeakerModel", aliases: ["wespeaker"], task: "speaker",
        summary: "WeSpeaker ResNet34-LM, MLX: 256-dim speaker embeddings",
        components: [ModelComponent(role: .model, repo: "aufklarer/WeSpeaker-ResNet34-LM-MLX", include: ["*.json", mlxWeights])],
        approximateSize: 25_000_000,
        source: "\(speechSwift) Sources/SpeechVAD/WeSpeaker.swift (fromPretrained, engine .mlx)")

    public static let reDimNet2Speaker = CatalogEntry(
        name: "ReDimNet2SpeakerModel", aliases: ["redimnet2", "redimnet"], task: "speaker",
        summary: "ReDimNet2-B6, CoreML: 192-dim speaker identity embeddings",
        components: [ModelComponent(role: .model, repo: "aufklarer/ReDimNet2-B6-CoreML", include: [
            "config.json", "ReDimNet2B6.mlmodelc/**",
        ])],
        approximateSize: nil,
        source: "\(speechSwift) Sources/SpeechVAD/ReDimNet2Speaker.swift (fromPretrained)")

    // MARK: - Enhancement and echo cancellation

    public static let speechEnhancer = CatalogEntry(
        name: "SpeechEnhancer", aliases: ["deepfilternet3", "denoise", "dfn3"], task: "enhance",
        summary: "DeepFilterNet3, CoreML FP16: noise suppression at 48 kHz",
        components: [ModelComponent(role: .model, repo: "aufklarer/DeepFilterNet3-CoreML", include: [
            "DeepFilterNet3.mlpackage/**", "auxiliary.npz",
        ])],
        approximateSize: 4_200_000,
        source: "\(speechSwift) Sources/SpeechEnhancement/SpeechEnhancement.swift (fromPretrained)")

    public static let localVQE = CatalogEntry(
        name: "LocalVQEEchoCanceller", aliases: ["localvqe", "aec"], task: "aec",
        summary: "LocalVQE v1.4 AEC 200K, CoreML: two-stream acoustic echo cancellation",
        components: [ModelComponent(role: .model, repo: "aufklarer/LocalVQE-v1.4-AEC-200K-CoreML", include: [
            "config.json", "LocalVQEAECResidualMask.mlmodelc/**", "LocalVQEAECFrontend.npz",
        ])],
        approximateSize: nil,
        source: "\(speechSwift) Sources/SpeechEnhancement/LocalVQEEchoCanceller.swift (fromPretrained)")

    // MARK: - Diarization

    public static let sortformer = CatalogEntry(
        name: "SortformerDiarizer", aliases: ["sortformer"], task: "diarization",
        summary: "NVIDIA Sortformer, CoreML: end-to-end diarization, up to 4 speakers",
        components: [ModelComponent(role: .model, repo: "aufklarer/Sortformer-Diarization-CoreML", include: [
            "config.json", "Sortformer.mlmodelc/**",
        ])],
        approximateSize: 240_000_000,
        source: "\(speechSwift) Sources/SpeechVAD/SortformerDiarizer.swift (fromPretrained)")

    public static let community1 = CatalogEntry(
        name: "Community1DiarizationPipeline", aliases: ["community1", "community-1", "pyannote-community-1"],
        task: "diarization",
        summary: "pyannote speaker-diarization-community-1, CoreML: one bundle with PLDA",
        components: [ModelComponent(role: .model, repo: "aufklarer/Pyannote-Community-1-CoreML", include: [
            "config.json", "segmentation.mlmodelc/**", "embedding.mlmodelc/**", "plda.safetensors",
        ])],
        approximateSize: nil,
        source: "\(speechSwift) Sources/SpeechVAD/Community1DiarizationPipeline.swift (fromPretrained)")

    public static let pyannoteDiarization = CatalogEntry(
        name: "PyannoteDiarizationPipeline", aliases: ["pyannote-diarization", "diarization"], task: "diarization",
        summary: "Pyannote segmentation + WeSpeaker embeddings + optional Silero VAD filter (three models)",
        components: [
            ModelComponent(role: .segmentation, repo: pyannoteVAD.repo, include: pyannoteVAD.include),
            ModelComponent(role: .embedding, repo: weSpeaker.repo, include: weSpeaker.include),
            ModelComponent(role: .vad, repo: sileroVAD.repo, include: sileroVAD.include, isOptional: true),
        ],
        approximateSize: 30_700_000,
        source: "\(speechSwift) Sources/SpeechVAD/DiarizationPipeline.swift (fromPretrained)")

    // MARK: - Chat

    public static let qwen35CoreMLChat = CatalogEntry(
        name: "Qwen35CoreMLChat", aliases: ["qwen3.5-coreml", "qwen35-coreml", "chat-coreml"], task: "chat",
        summary: "Qwen3.5 0.8B chat, CoreML INT8 (int8/: embedding and decoder packages, tokenizer)",
        components: [ModelComponent(role: .model, repo: "aufklarer/Qwen3.5-0.8B-Chat-CoreML", include: [
            "int8/*.json", "int8/**/*.mlmodel", "int8/**/*.bin", "int8/**/Manifest.json",
        ])],
        approximateSize: 981_000_000,
        source: "\(speechSwift) Sources/Qwen3Chat/Qwen35CoreMLChat.swift (fromPretrained, quantization .int8)")

    public static let qwen35MLXChat = CatalogEntry(
        name: "Qwen35MLXChat", aliases: ["qwen3.5-mlx", "qwen35-mlx", "qwen3.5", "chat"], task: "chat",
        summary: "Qwen3.5 0.8B chat, MLX INT4 (int4/)",
        components: [ModelComponent(role: .model, repo: "aufklarer/Qwen3.5-0.8B-Chat-MLX", include: [
            "int4/model.safetensors", "int4/config.json", "int4/tokenizer.json", "int4/tokenizer_config.json",
        ])],
        approximateSize: 418_000_000,
        source: "\(speechSwift) Sources/Qwen3Chat (Qwen35MLXChat.fromPretrained, quantization .int4)")
}
