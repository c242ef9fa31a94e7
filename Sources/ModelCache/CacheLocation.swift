// CacheLocation - where models live on disk: the cache base and each model's directory.
import Foundation
import HubClient

public enum CacheLocation {
    /// `QWEN3_CACHE_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/qwen3-speech`.
    public static func defaultBase(_ env: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let dir = env["QWEN3_CACHE_DIR"], !dir.trimmingCharacters(in: .whitespaces).isEmpty {
            return URL(fileURLWithPath: dir, isDirectory: true)
        }
        if let xdg = env["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("qwen3-speech", isDirectory: true)
        }
        let home = env["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".cache/qwen3-speech", isDirectory: true)
    }

    /// `<base>/models/<org>/<name>/`.
    public static func modelDirectory(base: URL, repo: RepoID) -> URL {
        base.appendingPathComponent("models", isDirectory: true)
            .appendingPathComponent(repo.org, isDirectory: true)
            .appendingPathComponent(repo.name, isDirectory: true)
    }
}
