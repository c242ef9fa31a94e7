// RequestTargets - where a record of a spool may point (docs/protocol.md, "Trust"). A daemon
// writes the Hub's bytes wherever a request or plan names, so a record's target must lie inside
// the cache base or inside a huggingface_hub cache the daemon was given, reached without a
// symlink out of it.
import Foundation
import HubTypes
import ModelCache
import SharedFiles

/// Where the records of a spool may send the Hub's bytes: below the cache base (never into the
/// spool itself), or below a huggingface_hub cache the daemon was given (`speech-fetchd
/// --hf-cache`). A target is judged by its real path: the part of it that exists is resolved
/// (symlinks followed), so a folder planted as a link out of the cache is refused, and the rest
/// may hold no `.` or `..`. A target elsewhere (a caller's own --cache-dir) is served when its
/// owner asked for that repo and commit there (`vouched`).
public struct RequestTargets: Sendable {
    /// The cache base, resolved.
    public let base: String
    /// The huggingface_hub caches, resolved.
    public let hubCaches: [String]
    /// `<base>/spool`, resolved: never a target.
    let spool: String
    /// Verdicts by model directory for `cachedRefusal`.
    private let memo = TargetVerdicts()

    public init(base: String, hubCaches: [String] = []) {
        self.base = RequestTargets.resolve(base) ?? base
        self.hubCaches = hubCaches.map { RequestTargets.resolve($0) ?? $0 }
        spool = self.base + "/spool"
    }

    /// The environment variable a daemon's processes read the huggingface_hub caches from
    /// (`speech-fetchd --hf-cache`, set for the supervisor and its workers): paths separated by `:`.
    public static let hubCachesVariable = "SPEECH_FETCH_DAEMON_HF_CACHES"

    /// The targets of a daemon serving `base` with the environment it runs in.
    public static func daemon(base: URL, environment: [String: String]) -> RequestTargets {
        let caches = (environment[hubCachesVariable] ?? "").split(separator: ":").map(String.init).filter { !$0.isEmpty }
        return RequestTargets(base: base.standardizedFileURL.path, hubCaches: caches)
    }

    /// Why a record pointing at `modelDir` (in `layout`) for `repo` at `commit` is not served;
    /// nil when it is: below the cache base (not in the spool) or, in the huggingface_hub layout,
    /// below a cache the daemon was given; anywhere else only when the target's owner asked for
    /// exactly this there (`vouched`).
    public func refusal(modelDir: String, layout: CacheLayout, repo: String, commit: String) -> String? {
        guard let resolved = RequestTargets.resolve(modelDir) else {
            return "its target \(modelDir) is not an absolute path of plain folder names"
        }
        let inSpool = resolved == spool || resolved.hasPrefix(spool + "/")
        let roots = layout == .huggingFace ? hubCaches + [base] : [base]
        if !inSpool && roots.contains(where: { resolved.hasPrefix($0 + "/") }) { return nil }
        if !inSpool && RequestTargets.vouched(resolved, repo: repo, commit: commit) { return nil }
        let shown = resolved == modelDir ? modelDir : "\(modelDir) (really \(resolved))"
        let caches = hubCaches.isEmpty ? "no huggingface_hub cache (speech-fetchd --hf-cache DIR gives one)"
            : "the huggingface_hub caches " + hubCaches.joined(separator: ", ")
        return "its target \(shown) lies outside the cache base \(base) and \(caches) that speech-fetchd writes into, "
            + "and holds no \(ModelLayout.manifest) of \(repo) at \(commit.prefix(12)) written by its owner, so nothing was "
            + "fetched for it: ask for it again with `speech download` (which writes that manifest before it hands over), "
            + "use a --cache-dir inside the cache base, or start speech-fetchd with --hf-cache for that huggingface_hub cache"
    }

    /// True when the directory `dir` (a resolved path) says its owner asked for `repo` at
    /// `commit` there: its manifest (`.speech-fetch.json`, which a caller writes before it hands a
    /// request over) is a regular file of the directory's owner naming them, and its staging
    /// folder, if there, is a real folder of the same owner or of this process's user (no link out
    /// of it: the daemon makes that folder itself when it plans the request, so a verdict does not
    /// change once it did, whichever of its processes judges and when). Whoever can plant that
    /// manifest can write the directory already.
    static func vouched(_ dir: String, repo: String, commit: String) -> Bool {
        var folder = stat(), manifest = stat(), staging = stat()
        let manifestPath = dir + "/" + ModelLayout.manifest
        guard lstat(dir, &folder) == 0, (folder.st_mode & S_IFMT) == S_IFDIR,
              lstat(manifestPath, &manifest) == 0, (manifest.st_mode & S_IFMT) == S_IFREG, manifest.st_uid == folder.st_uid
        else { return false }
        if lstat(dir + "/" + ModelLayout.staging, &staging) == 0 {
            guard (staging.st_mode & S_IFMT) == S_IFDIR, staging.st_uid == folder.st_uid || staging.st_uid == geteuid() else { return false }
        }
        guard let data = SharedFS.read(manifestPath, limit: 256 << 20).value, let snapshot = RepoSnapshot.decode(data) else { return false }
        return snapshot.repo == repo && snapshot.commit == commit
    }

    public func refusal(_ record: ModelDirectoryRecord) -> String? {
        refusal(modelDir: record.modelDir, layout: record.layout ?? .native, repo: record.repo, commit: record.commit)
    }

    /// `refusal`, judged once per target by this process: what a worker asks of every job it
    /// claims, and the verdict the planner's and splicer's passes take through `Spool.anchor`,
    /// which only opens the judged real path afresh for each pass.
    public func cachedRefusal(_ record: ModelDirectoryRecord) -> String? { cachedJudgement(record).refusal }

    /// `refusal` and the real path it judged (nil when the path is not absolute), once per target
    /// by this process: one verdict, whichever step asks.
    public func cachedJudgement(_ record: ModelDirectoryRecord) -> (refusal: String?, resolved: String?) {
        let key = [(record.layout ?? .native).rawValue, record.modelDir, record.repo, record.commit].joined(separator: "\n")
        if let known = memo.verdict(key) { return known }
        let verdict = (refusal(record), RequestTargets.resolve(record.modelDir))
        memo.remember(key, verdict)
        return verdict
    }

    /// The real path of `path`: its longest existing prefix resolved (symlinks followed), then the
    /// rest; nil when it is not absolute or a component of the rest is `.`, `..` or empty.
    public static func resolve(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return nil }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !parts.contains(where: { $0 == "." || $0 == ".." }) else { return nil }
        var existing = parts.count
        while existing > 0 {
            let prefix = "/" + parts.prefix(existing).joined(separator: "/")
            if let real = realpath(prefix, nil) {
                defer { free(real) }
                let head = String(cString: real)
                let rest = parts.dropFirst(existing)
                return rest.isEmpty ? head : (head == "/" ? "" : head) + "/" + rest.joined(separator: "/")
            }
            existing -= 1
        }
        return "/" + parts.joined(separator: "/")
    }

    // MARK: Published for callers

    /// `fetchd-<node>.hf-caches`: the huggingface_hub caches the node's daemon writes into, one
    /// per line, so that a caller hands over only what that daemon will fetch.
    public static func publishedPath(_ layout: SpoolLayout, node: String) -> String { layout.root + "/fetchd-\(node).hf-caches" }

    /// Writes the list a caller reads (`published`).
    public func publish(in spool: Spool) {
        let temp = spool.tempPath("hf-caches")
        guard (try? SpoolFS.writeNew(temp, Data(hubCaches.map { $0 + "\n" }.joined().utf8))) != nil else { return }
        if rename(temp, RequestTargets.publishedPath(spool.layout, node: spool.owner.node)) != 0 { unlink(temp) }
    }

    /// Removes the list when the daemon stops.
    public static func retract(in spool: Spool) { unlink(publishedPath(spool.layout, node: spool.owner.node)) }

    /// The targets the daemon of this node serves, as it published them (only the cache base
    /// when none is published).
    public static func published(by spool: Spool) -> RequestTargets {
        let text = SharedFS.read(publishedPath(spool.layout, node: spool.owner.node), limit: 1 << 20).value
            .map { String(decoding: $0, as: UTF8.self) } ?? ""
        let base = (spool.root as NSString).deletingLastPathComponent
        return RequestTargets(base: base, hubCaches: text.split(separator: "\n").map(String.init).filter { $0.hasPrefix("/") })
    }
}

/// Verdicts of `RequestTargets.cachedRefusal` (a few hundred at most: one per model directory).
final class TargetVerdicts: @unchecked Sendable {
    typealias Verdict = (refusal: String?, resolved: String?)
    private let lock = NSLock()
    private var verdicts: [String: Verdict] = [:]

    func verdict(_ key: String) -> Verdict? { lock.withLock { verdicts[key] } }

    func remember(_ key: String, _ verdict: Verdict) {
        lock.withLock {
            if verdicts.count > 4096 { verdicts.removeAll() }
            verdicts[key] = verdict
        }
    }
}
