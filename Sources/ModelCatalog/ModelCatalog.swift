// ModelCatalog - the supported models by name: which Hub repos each one needs and which files of them.
// The entries themselves are in CatalogEntries.swift; docs/models.md lists them with their sources.
// Data only: downloading a model (`fromPretrained`, one Swift type per model) is SpeechFetch's,
// which re-exports this module.
import Foundation
import ModelCache

/// What a part of a model is for. Most models have one part, `.model`; some need a second
/// repo (a tokenizer) and the Pyannote pipeline is three models.
public enum ComponentRole: String, Sendable, Hashable, CaseIterable {
    case model
    case tokenizer
    case segmentation
    case embedding
    case vad
}

/// One Hub repo a model needs, and the files of it the model loads.
public struct ModelComponent: Sendable, Hashable {
    public let role: ComponentRole
    /// `org/name` on the Hub.
    public let repo: String
    /// Globs (`*` also crosses `/`; CoreML bundles are directories: `X.mlmodelc/**`) and literal
    /// paths, as `HuggingFaceDownloader.download(include:)` takes them.
    public let include: [String]
    /// True for a part the model can run without (the Pyannote pipeline's VAD filter).
    public let isOptional: Bool

    public init(role: ComponentRole, repo: String, include: [String], isOptional: Bool = false) {
        self.role = role
        self.repo = repo
        self.include = include
        self.isOptional = isOptional
    }
}

/// A model of the catalog: its Swift type name, CLI aliases, and the repos and files it needs.
public struct CatalogEntry: Sendable, Hashable, CustomStringConvertible {
    /// The Swift type name, e.g. "KokoroTTSModel".
    public let name: String
    /// Set on an alternative build of a model (Qwen3ASRModel's "large"); nil for the default.
    public let variant: String?
    /// Short lowercase names for the command line, e.g. "kokoro".
    public let aliases: [String]
    /// What the model does: "asr", "tts", "vad", "turn", "speaker", "enhance", "aec",
    /// "diarization", "s2s", "chat".
    public let task: String
    /// One line for listings.
    public let summary: String
    /// The repos it needs, the main one first.
    public let components: [ModelComponent]
    /// Download size in bytes of the default selection, when a source states it.
    public let approximateSize: Int64?
    /// Where the repo ids and file lists come from (see docs/models.md).
    public let source: String

    public init(name: String, variant: String? = nil, aliases: [String], task: String, summary: String,
                components: [ModelComponent], approximateSize: Int64?, source: String) {
        precondition(!components.isEmpty, "a catalog entry needs at least one repo")
        self.name = name
        self.variant = variant
        self.aliases = aliases
        self.task = task
        self.summary = summary
        self.components = components
        self.approximateSize = approximateSize
        self.source = source
    }

    /// The main repo (`components[0]`).
    public var repo: String { components[0].repo }
    /// The files of the main repo.
    public var include: [String] { components[0].include }
    /// Every repo the model needs, main first, without repeats.
    public var repos: [String] {
        var seen = Set<String>()
        return components.map(\.repo).filter { seen.insert($0).inserted }
    }
    /// "Qwen3ASRModel" or "Qwen3ASRModel (large)".
    public var displayName: String { variant.map { "\(name) (\($0))" } ?? name }
    public var description: String { "\(displayName) → \(repos.joined(separator: " + "))" }

    public func component(_ role: ComponentRole) -> ModelComponent? {
        components.first { $0.role == role }
    }
}

/// The supported models (the "Supported Models" table of the cache-and-offline page).
public enum ModelCatalog {
    /// One entry per supported model, default builds, in the table's order.
    public static let entries: [CatalogEntry] = [
        .qwen3ASR, .parakeetASR, .coreMLASR, .kokoroTTS, .qwen3TTS, .qwen3TTSCoreML, .cosyVoiceTTS,
        .personaPlex, .sileroVAD, .pyannoteVAD, .fireRedVAD, .smartTurn, .weSpeaker, .reDimNet2Speaker,
        .speechEnhancer, .localVQE, .sortformer, .community1, .pyannoteDiarization, .qwen35CoreMLChat,
        .qwen35MLXChat,
    ]

    /// Alternative builds reachable by alias (`qwen3-asr-large`); not part of `entries`.
    public static let variants: [CatalogEntry] = [.qwen3ASRLarge]

    /// `entries` followed by `variants`.
    public static var all: [CatalogEntry] { entries + variants }

    /// Repo id → the selections the catalog fetches it with (for `CacheAdmin`: a catalog repo
    /// is complete when one entry's files are all there).
    public static var fileSelections: [String: [FileSelection]] {
        var out: [String: [FileSelection]] = [:]
        for component in all.flatMap(\.components) {
            let selection = FileSelection(component.include)
            if !(out[component.repo] ?? []).contains(selection) { out[component.repo, default: []].append(selection) }
        }
        return out
    }

    /// The entry whose type name or alias is `nameOrAlias` (case-insensitive; a variant also
    /// answers to "Name:variant"). Default builds win over variants.
    public static func find(_ nameOrAlias: String) -> CatalogEntry? {
        let key = nameOrAlias.trimmingCharacters(in: .whitespaces).lowercased()
        guard !key.isEmpty else { return nil }
        for entry in all where entry.variant == nil && entry.name.lowercased() == key { return entry }
        for entry in all where entry.aliases.contains(key) { return entry }
        for entry in all {
            if let variant = entry.variant, "\(entry.name):\(variant)".lowercased() == key { return entry }
        }
        return nil
    }
}
