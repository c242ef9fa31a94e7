// DurationText - spans of seconds as people read them: the one formatting of durations.

public enum DurationText {
    /// An estimate to watch tick: 45s, 3m20s, 2h5m; `--` when not finite or negative.
    public static func compact(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "--" }
        let s = Int(seconds.rounded())
        return s >= 3600 ? "\(s / 3600)h\((s % 3600) / 60)m" : s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
    }

    /// An age, coarsely: 45 s, 12 min, 5 h, 3 d.
    public static func coarse(_ seconds: Double) -> String {
        let s = seconds.isFinite ? max(0, Int(seconds)) : 0
        if s < 120 { return "\(s) s" }
        if s < 7200 { return "\(s / 60) min" }
        if s < 172_800 { return "\(s / 3600) h" }
        return "\(s / 86400) d"
    }
}
