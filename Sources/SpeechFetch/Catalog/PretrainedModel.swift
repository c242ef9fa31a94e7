// PretrainedModel - downloading a catalog model (all its repos) and what that produces.
// One implementation behind every `fromPretrained` and behind `speech download <model>`.
import Foundation
import ModelCache
import ModelCatalog

/// One repo of a model, present on disk.
public struct LoadedComponent: Sendable {
    public let role: ComponentRole
    public let repo: String
    /// The repo's model directory.
    public let directory: URL
    /// Repo paths of the selected files, all present in `directory` (unless `handedOver`).
    public let files: [String]
    /// The commit the files were fetched at (nil when served from the cache without the Hub).
    public let commit: String?
    /// Files transferred by this call.
    public let fetched: [String]
    /// Set when the Hub was unreachable and the cache satisfied the call.
    public let warning: String?
    /// True when the transfer was handed to speech-fetchd (`host: .detach`): not yet on disk.
    public let handedOver: Bool

    init(role: ComponentRole, repo: String, result: DownloadResult) {
        self.role = role
        self.repo = repo
        directory = result.directory
        files = result.files
        commit = result.commit
        fetched = result.fetched
        warning = result.warning
        handedOver = result.handedOver
    }
}

/// A catalog model on disk: its directory and files, and those of every other repo it needs.
public struct PretrainedModel: Sendable {
    public let entry: CatalogEntry
    /// Every repo of the model, the main one first.
    public let components: [LoadedComponent]

    /// The main model directory.
    public var directory: URL { components[0].directory }
    /// Repo paths of the main model's files.
    public var files: [String] { components[0].files }
    /// The part with this role (e.g. `.tokenizer`), if loaded.
    public func component(_ role: ComponentRole) -> LoadedComponent? { components.first { $0.role == role } }
    /// Files transferred by this call, over all repos.
    public var fetched: [String] { components.flatMap(\.fetched) }
    /// Warnings of the repos served from the cache because the Hub was unreachable.
    public var warnings: [String] { components.compactMap(\.warning) }
}

/// Progress of a model download: which repo of the model, and the transfer of that repo.
public struct ModelProgress: Sendable {
    public let model: String
    public let role: ComponentRole
    public let repo: String
    /// Index of this repo among the repos of the call, and their count.
    public let componentIndex: Int
    public let componentCount: Int
    public let transfer: DownloadProgress

    /// Fraction over the whole call, counting each repo equally.
    public var fraction: Double {
        componentCount > 0 ? (Double(componentIndex) + transfer.fraction) / Double(componentCount) : 1
    }
}

/// A catalog model: a Swift type that names its catalog entry.
public protocol CatalogModel: Sendable {
    static var catalogEntry: CatalogEntry { get }
}

/// A catalog model with the usual `fromPretrained(cacheDir:offlineMode:progress:downloader:)`.
public protocol PretrainedModelType: CatalogModel {}

extension PretrainedModelType {
    /// Downloads (or, with `offlineMode: true`, finds without any network access) the model's
    /// files and returns its directory and file list.
    ///
    /// - Parameters:
    ///   - cacheDir: the model's own directory; nil means `<cache base>/models/<org>/<name>/`.
    ///     A second repo of the model (a tokenizer) always goes under the cache base.
    ///   - offlineMode: true opens no socket (missing files throw `CacheError.cacheMiss`); nil
    ///     follows `HF_HUB_OFFLINE`.
    public static func fromPretrained(
        cacheDir: URL? = nil,
        offlineMode: Bool? = nil,
        progress: @escaping @Sendable (ModelProgress) -> Void = { _ in },
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) async throws -> PretrainedModel {
        try await ModelCatalog.download(catalogEntry, cacheDir: cacheDir, offlineMode: offlineMode,
                                        progress: progress, downloader: downloader)
    }
}

extension ModelCatalog {
    /// One repo download of a model download.
    struct Step {
        let component: ModelComponent
        let cacheDir: URL?
        let cacheBaseDir: URL?
    }

    /// Where each repo of `entry` goes: `componentDirectories[role]`, else `cacheDir` for the
    /// main repo, else `<cacheBaseDir or the default base>/models/<org>/<name>/`.
    static func steps(_ entry: CatalogEntry, cacheDir: URL?, cacheBaseDir: URL?,
                      componentDirectories: [ComponentRole: URL], includeOptional: Bool) -> [Step] {
        entry.components.enumerated().compactMap { index, component in
            if component.isOptional && !includeOptional { return nil }
            if let dir = componentDirectories[component.role] {
                return Step(component: component, cacheDir: dir, cacheBaseDir: nil)
            }
            if index == 0, let cacheDir {
                return Step(component: component, cacheDir: cacheDir, cacheBaseDir: nil)
            }
            return Step(component: component, cacheDir: nil, cacheBaseDir: cacheBaseDir)
        }
    }

    static func report(_ entry: CatalogEntry, _ step: Step, index: Int, count: Int,
                       to progress: @escaping @Sendable (ModelProgress) -> Void) -> @Sendable (DownloadProgress) -> Void {
        let name = entry.displayName, role = step.component.role, repo = step.component.repo
        return { transfer in
            progress(ModelProgress(model: name, role: role, repo: repo, componentIndex: index,
                                   componentCount: count, transfer: transfer))
        }
    }

    /// Downloads every repo `entry` needs, one after the other, and returns where they are.
    ///
    /// - Parameters:
    ///   - cacheDir: the main repo's own directory (as `download(cacheDir:)`).
    ///   - cacheBaseDir: the base for every repo not placed otherwise (nil: the default base).
    ///   - componentDirectories: explicit directories per part, e.g. `[.tokenizer: dir]`.
    ///   - includeOptional: false skips optional parts (the pipeline's VAD).
    public static func download(
        _ entry: CatalogEntry,
        cacheDir: URL? = nil,
        cacheBaseDir: URL? = nil,
        componentDirectories: [ComponentRole: URL] = [:],
        offlineMode: Bool? = nil,
        includeOptional: Bool = true,
        progress: @escaping @Sendable (ModelProgress) -> Void = { _ in },
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) async throws -> PretrainedModel {
        try await runOffThread { isCancelled in
            try downloadBlocking(entry, cacheDir: cacheDir, cacheBaseDir: cacheBaseDir,
                                 componentDirectories: componentDirectories, offlineMode: offlineMode,
                                 includeOptional: includeOptional, progress: progress, isCancelled: isCancelled,
                                 downloader: downloader)
        }
    }

    /// The same download, blocking the calling thread (command-line tools). `host: .detach`
    /// hands every repo to speech-fetchd and returns at once.
    public static func downloadBlocking(
        _ entry: CatalogEntry,
        cacheDir: URL? = nil,
        cacheBaseDir: URL? = nil,
        componentDirectories: [ComponentRole: URL] = [:],
        offlineMode: Bool? = nil,
        includeOptional: Bool = true,
        host: TransferHost = .automatic,
        progress: @escaping @Sendable (ModelProgress) -> Void = { _ in },
        isCancelled: @escaping @Sendable () -> Bool = { false },
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) throws -> PretrainedModel {
        let plan = steps(entry, cacheDir: cacheDir, cacheBaseDir: cacheBaseDir,
                         componentDirectories: componentDirectories, includeOptional: includeOptional)
        var loaded: [LoadedComponent] = []
        for (index, step) in plan.enumerated() {
            let result = try downloader.downloadBlocking(
                repo: step.component.repo, include: step.component.include, cacheDir: step.cacheDir,
                cacheBaseDir: step.cacheBaseDir, offlineMode: offlineMode, host: host,
                progress: report(entry, step, index: index, count: plan.count, to: progress), isCancelled: isCancelled)
            loaded.append(LoadedComponent(role: step.component.role, repo: step.component.repo, result: result))
        }
        return PretrainedModel(entry: entry, components: loaded)
    }

    /// Repo → files missing from the cache, over every required repo of `entry` (empty when the
    /// model is complete). Looks at the disk only, never the network.
    public static func missingFiles(
        _ entry: CatalogEntry,
        cacheDir: URL? = nil,
        cacheBaseDir: URL? = nil,
        componentDirectories: [ComponentRole: URL] = [:],
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) -> [String: [String]] {
        var missing: [String: [String]] = [:]
        for step in steps(entry, cacheDir: cacheDir, cacheBaseDir: cacheBaseDir,
                          componentDirectories: componentDirectories, includeOptional: false) {
            do {
                _ = try downloader.downloadBlocking(repo: step.component.repo, include: step.component.include,
                                                    cacheDir: step.cacheDir, cacheBaseDir: step.cacheBaseDir,
                                                    offlineMode: true)
            } catch CacheError.cacheMiss(_, _, let files, _) {
                missing[step.component.repo, default: []] += files.entries
            } catch {
                missing[step.component.repo, default: []].append("\(error)")
            }
        }
        return missing
    }

    /// True when every required repo of `entry` is complete in the cache (disk only).
    public static func isCached(
        _ entry: CatalogEntry,
        cacheDir: URL? = nil,
        cacheBaseDir: URL? = nil,
        downloader: HuggingFaceDownloader = HuggingFaceDownloader()
    ) -> Bool {
        missingFiles(entry, cacheDir: cacheDir, cacheBaseDir: cacheBaseDir, downloader: downloader).isEmpty
    }
}
