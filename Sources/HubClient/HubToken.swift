// HubToken - the credential for gated and private repos, found where huggingface_hub looks.
import Foundation

public enum HubToken {
    /// `HF_TOKEN`, else `HUGGING_FACE_HUB_TOKEN`, else `${HF_HOME:-~/.cache/huggingface}/token`;
    /// blank values are ignored.
    public static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        lookUp(env)?.token
    }

    /// Where the token comes from (`HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`, or the token file's
    /// path), never the token itself: for `speech env`. nil when there is none.
    public static func source(_ env: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        lookUp(env)?.source
    }

    private static func lookUp(_ env: [String: String]) -> (token: String, source: String)? {
        for name in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
            if let value = env[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty { return (value, name) }
        }
        let home = env["HF_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((env["HOME"] ?? NSHomeDirectory()) + "/.cache/huggingface")
        guard let data = FileManager.default.contents(atPath: home + "/token") else { return nil }
        let value = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return value.isEmpty ? nil : (value, home + "/token")
    }
}
