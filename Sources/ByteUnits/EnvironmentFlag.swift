// EnvironmentFlag - a yes/no environment variable read by the one rule (HF_HUB_OFFLINE,
// HF_HUB_DISABLE_PROGRESS_BARS, HF_HUB_ENABLE_HF_TRANSFER, SPEECH_FETCH_ENDGAME, HF_HUB_DISABLE_XET).
import Foundation

/// The value of a switch in the environment, spelt as huggingface_hub spells its own.
public enum EnvironmentFlag {
    /// true for `1`, `true`, `yes`, `on`; false for `0`, `false`, `no`, `off` (any case, blanks
    /// around ignored); nil when `name` is unset or holds anything else (the caller's default).
    public static func value(_ name: String, in environment: [String: String]) -> Bool? {
        guard let raw = environment[name] else { return nil }
        switch raw.trimmingCharacters(in: .whitespaces).lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: return nil
        }
    }

    /// True when `name` is switched on.
    public static func isOn(_ name: String, in environment: [String: String]) -> Bool { value(name, in: environment) == true }
}
