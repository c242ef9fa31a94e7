// ClaimPolicy - the pure rules of claiming, from counts and byte figures alone (no I/O): whether a
// slot may claim one more ready range (its node's fair share), and whether an endgame duplicate
// would be published before the claim it races (docs/cluster.md, "Size each node's share" and
// "Endgame"). The spool's looks (`Spool.claimLoads`, `Spool.endgameLook`) gather the figures.

public enum ClaimPolicy {
    /// Whether a slot of `node` may claim one more of `ready` ranges, given every node's claims
    /// (`Spool.claimLoads`) and the live nodes (docs/cluster.md, "Size each node's share"):
    /// - its claims are fewer than ceil((ready + claimed) / nodes), its share by count; and
    /// - its outstanding work (the ranges it holds, each by the share still to come) exceeds the
    ///   even share of all outstanding work (ready ranges and every claim's rest) by at most half
    ///   a range once it takes a whole one, or it is the least loaded live node.
    /// The second rule is for the end of a file: a node whose ranges are nearly done takes the
    /// last ones, not one that has just started four, so the nodes finish together.
    public static func mayClaim(node: String, ready: Int, loads: [String: [Double]], liveNodes: Int) -> Bool {
        let nodes = max(1, liveNodes)
        let mine = loads[node] ?? []
        guard withinCountShare(node: node, ready: ready, loads: loads, liveNodes: liveNodes) else { return false }
        guard nodes > 1 else { return true }
        let others = loads.filter { $0.key != node }.map { $0.value.reduce(0, +) }
        let myLoad = mine.reduce(0, +)
        // A live node without claims is the least loaded (0).
        if myLoad <= (others.count < nodes - 1 ? 0 : others.min() ?? 0) { return true }
        let total = Double(ready) + myLoad + others.reduce(0, +)
        return myLoad + 0.5 <= total / Double(nodes)
    }

    /// The first rule of `mayClaim` alone, which needs the claims' count only (no look at their
    /// bytes): the node's claims are fewer than its share by count.
    public static func withinCountShare(node: String, ready: Int, loads: [String: [Double]], liveNodes: Int) -> Bool {
        withinCountShare(ClaimCount(total: loads.values.reduce(0) { $0 + $1.count }, mine: (loads[node] ?? []).count),
                         ready: ready, liveNodes: liveNodes)
    }

    /// The first rule from counts alone: `claims.mine` is fewer than ceil((ready + claims.total) / nodes).
    public static func withinCountShare(_ claims: ClaimCount, ready: Int, liveNodes: Int) -> Bool {
        let nodes = max(1, liveNodes)
        return claims.mine < max(1, (ready + claims.total + nodes - 1) / nodes)
    }

    /// Whether a duplicate of a claim with `remaining` of its `length` bytes to come would be
    /// published before its holder's part, every node's link being as fast (each node's link is
    /// what limits it; docs/cluster.md, "Endgame"). A link shares its bytes among its ranges in
    /// flight, so the holder's part is done once `sum(min(r, remaining))` of its ranges' bytes
    /// (`holder`) have crossed its link; the duplicate starts from the range's first byte beside
    /// this node's ranges in flight (`mine`), and is done once `length + sum(min(m, length))` have
    /// crossed this one. It must win by a quarter of a range: a duplicate that ends about when the
    /// holder does only slows this node's own ranges.
    public static func duplicateWouldWin(remaining: Int64, length: Int64, holder: [Int64], mine: [Int64]) -> Bool {
        let theirs = holder.reduce(Int64(0)) { $0 + min($1, remaining) }
        let ours = mine.reduce(length) { $0 + min($1, length) }
        return ours + length / 4 <= theirs
    }
}
