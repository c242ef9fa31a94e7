// EditDistance - the Levenshtein distance behind every "did you mean": an option or a catalog
// name mistyped (Characters), a file pattern that matched nothing (Unicode scalars).

/// The fewest insertions, deletions and substitutions that turn `a` into `b` (O(n·m): the
/// names and patterns compared are short).
public func editDistance<A: Collection, B: Collection>(_ a: A, _ b: B) -> Int where A.Element == B.Element, A.Element: Equatable {
    let x = Array(a), y = Array(b)
    guard !x.isEmpty else { return y.count }
    var row = Array(0...y.count)
    for i in 1...x.count {
        var previous = row[0]
        row[0] = i
        for j in stride(from: 1, through: y.count, by: 1) {
            let substitution = previous + (x[i - 1] == y[j - 1] ? 0 : 1)
            previous = row[j]
            row[j] = min(substitution, row[j] + 1, row[j - 1] + 1)
        }
    }
    return row[y.count]
}
