// PlanCheck - whether a plan read back from the spool can be split into its ranges.

extension PlannedFile {
    /// True when the key has the form `key(modelDir:path:commit:)` gives (24 hex: the form job
    /// names are parsed by), the file is non-empty and `rangeCount` is exactly the number of
    /// `rangeSize` ranges it takes: only then do `range(_:)` and the job names cover the file.
    public var isConsistent: Bool {
        key.utf8.count == 24 && key.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) })
            && rangeSize > 0 && file.size > 0
            && rangeCount == Int(file.size / rangeSize) + (file.size % rangeSize == 0 ? 0 : 1)
            && (kind != .xet || (rangeCount == 1 && file.xetHash != nil))  // a Xet job is the whole file
    }
}
