// PretrainedModels - one Swift type per supported model. They download models, they do not run
// them: `fromPretrained` returns the model's directory and files (see PretrainedModel).
import Foundation
import ModelCatalog

extension ModelCatalog {
    /// The Swift types of `entries`, in the same order.
    public static var modelTypes: [any CatalogModel.Type] {
        [
            Qwen3ASRModel.self, ParakeetASRModel.self, CoreMLASRModel.self, KokoroTTSModel.self,
            Qwen3TTSModel.self, Qwen3TTSCoreMLModel.self, CosyVoiceTTSModel.self, PersonaPlexModel.self,
            SileroVADModel.self, PyannoteVADModel.self, FireRedVADModel.self, SmartTurnModel.self,
            WeSpeakerModel.self, ReDimNet2SpeakerModel.self, SpeechEnhancer.self, LocalVQEEchoCanceller.self,
            SortformerDiarizer.self, Community1DiarizationPipeline.self, PyannoteDiarizationPipeline.self,
            Qwen35CoreMLChat.self, Qwen35MLXChat.self,
        ]
    }

    /// The Swift type of the entry named `name` (type name, case-insensitive).
    public static func modelType(named name: String) -> (any CatalogModel.Type)? {
        modelTypes.first { $0.catalogEntry.name.lowercased() == name.lowercased() }
    }
}

// MARK: - Speech recognition

/// Qwen3-ASR (MLX). Default 0.6B 4-bit; `fromPretrained(variant: .large)` for 1.7B 8-bit.
public enum Qwen3ASRModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.qwen3ASR

    public enum Variant: String, Sendable, CaseIterable {
        /// `aufklarer/Qwen3-ASR-0.6B-MLX-4bit`
        case small
        /// `aufklarer/Qwen3-ASR-1.7B-MLX-8bit`
        case large

        public var catalogEntry: CatalogEntry {
            switch self {
            case .small: return .qwen3ASR
            case .large: return .qwen3ASRLarge
            }
        }
    }

    /// `fromPretrained` for a chosen size.
    public static func fromPretrained(
        variant: Variant,
        cacheDir: URL? = nil,
        offlineMode: Bool? = nil,
        progress: @escaping @Sendable (ModelProgress) -> Void = { _ in },
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) async throws -> PretrainedModel {
        try await ModelCatalog.download(variant.catalogEntry, cacheDir: cacheDir, offlineMode: offlineMode,
                                        progress: progress, downloader: downloader)
    }
}

/// Parakeet TDT 0.6B v3 (CoreML INT8).
public enum ParakeetASRModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.parakeetASR
}

/// Qwen3-ASR on CoreML. Its tokenizer comes from `aufklarer/Qwen3-ASR-0.6B-MLX-4bit`, a second
/// download that lands under the cache base (`component(.tokenizer)`).
public enum CoreMLASRModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.coreMLASR
}

// MARK: - Speech synthesis

/// Kokoro 82M (CoreML).
public enum KokoroTTSModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.kokoroTTS
}

/// Qwen3-TTS (MLX) and its speech tokenizer `Qwen/Qwen3-TTS-Tokenizer-12Hz`.
public enum Qwen3TTSModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.qwen3TTS

    /// - Parameters:
    ///   - cacheDir: the TTS model's own directory (nil: under the cache base).
    ///   - tokenizerCacheDir: the speech tokenizer's own directory (nil: under the cache base).
    public static func fromPretrained(
        cacheDir: URL? = nil,
        tokenizerCacheDir: URL?,
        offlineMode: Bool? = nil,
        progress: @escaping @Sendable (ModelProgress) -> Void = { _ in },
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) async throws -> PretrainedModel {
        try await ModelCatalog.download(catalogEntry, cacheDir: cacheDir,
                                        componentDirectories: tokenizerCacheDir.map { [.tokenizer: $0] } ?? [:],
                                        offlineMode: offlineMode, progress: progress, downloader: downloader)
    }

    /// Both directories given explicitly (e.g. shipped with an app); checked on disk only, no
    /// network. Throws `CacheError.cacheMiss` naming what either directory lacks.
    public static func fromLocal(
        modelDirectory: URL,
        tokenizerDirectory: URL,
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) async throws -> PretrainedModel {
        try await ModelCatalog.download(catalogEntry, cacheDir: modelDirectory,
                                        componentDirectories: [.tokenizer: tokenizerDirectory],
                                        offlineMode: true, downloader: downloader)
    }
}

/// Qwen3-TTS on CoreML.
public enum Qwen3TTSCoreMLModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.qwen3TTSCoreML
}

/// CosyVoice3 0.5B (MLX).
public enum CosyVoiceTTSModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.cosyVoiceTTS
}

// MARK: - Speech to speech

/// PersonaPlex 7B (MLX 4-bit).
public enum PersonaPlexModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.personaPlex
}

// MARK: - Voice activity and turns

/// Silero VAD v6.2.1 (MLX).
public enum SileroVADModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.sileroVAD
}

/// Pyannote segmentation 3.0 (MLX).
public enum PyannoteVADModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.pyannoteVAD
}

/// FireRedVAD (CoreML).
public enum FireRedVADModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.fireRedVAD
}

/// Smart Turn v3.2 end-of-turn classifier (CoreML).
public enum SmartTurnModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.smartTurn
}

// MARK: - Speakers

/// WeSpeaker ResNet34-LM (MLX).
public enum WeSpeakerModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.weSpeaker
}

/// ReDimNet2-B6 speaker identity (CoreML).
public enum ReDimNet2SpeakerModel: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.reDimNet2Speaker
}

// MARK: - Enhancement and echo cancellation

/// DeepFilterNet3 (CoreML).
public enum SpeechEnhancer: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.speechEnhancer
}

/// LocalVQE v1.4 AEC (CoreML).
public enum LocalVQEEchoCanceller: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.localVQE
}

// MARK: - Diarization

/// Sortformer (CoreML).
public enum SortformerDiarizer: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.sortformer
}

/// pyannote Community-1 (CoreML): one self-contained bundle, so it takes `cacheDir`.
public enum Community1DiarizationPipeline: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.community1
}

/// Pyannote segmentation + WeSpeaker embedding + optional Silero VAD: three repos, so it takes
/// a base directory and each model gets `<base>/models/<org>/<name>/`.
public enum PyannoteDiarizationPipeline: CatalogModel {
    public static let catalogEntry = CatalogEntry.pyannoteDiarization

    /// - Parameters:
    ///   - cacheBaseDir: the base for the three models (nil: the default cache base).
    ///   - includeVAD: false leaves out the Silero VAD filter model.
    /// - Returns: `directory` is the segmentation model's; `component(.embedding)` and
    ///   `component(.vad)` hold the others.
    public static func fromPretrained(
        cacheBaseDir: URL? = nil,
        offlineMode: Bool? = nil,
        includeVAD: Bool = true,
        progress: @escaping @Sendable (ModelProgress) -> Void = { _ in },
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) async throws -> PretrainedModel {
        try await ModelCatalog.download(catalogEntry, cacheBaseDir: cacheBaseDir, offlineMode: offlineMode,
                                        includeOptional: includeVAD, progress: progress, downloader: downloader)
    }
}

// MARK: - Chat

/// Qwen3.5 0.8B chat (CoreML INT8).
public enum Qwen35CoreMLChat: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.qwen35CoreMLChat
}

/// Qwen3.5 0.8B chat (MLX INT4).
public enum Qwen35MLXChat: PretrainedModelType {
    public static let catalogEntry = CatalogEntry.qwen35MLXChat
}
