// PlanCheck - whether a plan read back from the spool can be split into its ranges.

extension PlannedFile {
    /// True when the file is non-empty and `rangeCount` is exactly the number of `rangeSize`
    /// ranges it takes: only then do `range(_:)` and the job names cover the file.
    public var isConsistent: Bool {
        rangeSize > 0 && file.size > 0
            && rangeCount == Int(file.size / rangeSize) + (file.size % rangeSize == 0 ? 0 : 1)
    }
}
