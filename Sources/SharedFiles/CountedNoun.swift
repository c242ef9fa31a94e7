// CountedNoun - "1 file", "2 files": a count and its noun in the number the count takes, for
// every message and log line that counts something (one helper, so no line says "1 files").

/// `count` and `noun`, the noun plural unless the count is one: `counted(1, "worker")` is
/// "1 worker", `counted(3, "worker")` "3 workers". `plural` names an irregular plural.
public func counted(_ count: Int, _ noun: String, plural: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
}
