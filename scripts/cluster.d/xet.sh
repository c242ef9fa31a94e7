# xet.sh - cluster-test's scenario G, sourced by scripts/cluster-test: Xet across nodes. Revision 1
# of a Xet-backed file is asked for on node1 (its one Xet job runs on whichever node's worker claims
# it), then the Hub's copy becomes revision 2 (1 KiB inserted at 40 %, 16 bytes overwritten at
# 70 %: a new commit) and node2 asks for it. The worker that claims revision 2 reads every chunk
# revision 1's final file holds through the chunk index of the shared cache base (each chunk
# hashed again) and fetches only the rest from the CAS: at most 2 % of the file's bytes in xorb
# bytes the test Hub served, none through the bridge; the file reads byte-identical through
# node1's and node2's mounts (docs/xet.md, "Under the daemon").

# The test Hub's Xet counters since start: "<xorb bytes> <bridge bytes> <reconstructions>".
xet_counters() {
    local in_ns=() json
    [[ -z "$HUB_NS" ]] || in_ns=(ip netns exec "$HUB_NS")
    json=$("${in_ns[@]}" curl -sf "$(hub_url)/_testhub/counters") || { echo "nan nan nan"; return; }
    printf '%s %s %s\n' "$(grep -o '"xorbBytes" *: *[0-9]*' <<<"$json" | grep -o '[0-9]*$')" \
        "$(grep -o '"bridgeBytes" *: *[0-9]*' <<<"$json" | grep -o '[0-9]*$')" \
        "$(grep -o '"reconstructions" *: *[0-9]*' <<<"$json" | grep -o '[0-9]*$')"
}

# The SHA-256 of the model's file read through node I's own mount.
sha_on_node() {
    local i=$1 repo=$2 log="$LOGS/g-sha-node$1.log"
    : >"$log"
    node_spawn "$log" "$i" -- sha256sum "$CACHE/models/$repo/$FILE"
    wait "$SPAWNED" || true
    grep -o '^[0-9a-f]\{64\}' "$log" | head -1
}

# Which node's worker claimed the Xet job in an events window.
xet_claimant() { grep -o " MOVED_TO $SPOOL/jobs/claimed/.*@node[0-9]*@" <<<"$1" | grep -o 'node[0-9]*' | sort -u | tr '\n' ' '; }

scenario_g() {
    local repo=cluster/scenario-g src="$WORK/hub/cluster/scenario-g/$FILE" ev c0 c1 c2 size want i
    say "G: a $G_MIB MiB Xet-backed file, revision 1 asked for on node1, then revision 2 on node2, on $CLUSTER_FS"
    cap_links off
    for i in 1 2 3; do kill -0 "${DAEMON_PID[$i]:-0}" 2>/dev/null || { local t; t=$(now); start_node "$i"; wait_heartbeat "$i" "$t"; }; done
    c0=$(xet_counters)
    ev=$(events_mark)
    download_on 1 "$repo" "$LOGS/g1-download-node1.log"
    local one=$DL_SECONDS
    check "G: revision 1 on node1 exits 0 ($one s)" test "$DL_RC" -eq 0
    check "G: revision 1 verifies" verify_file "$repo" "$FILE"
    c1=$(xet_counters)
    local x0 b0 r0 x1 b1 r1 x2 b2 r2
    read -r x0 b0 r0 <<<"$c0"; read -r x1 b1 r1 <<<"$c1"
    figure "G: revision 1 ($G_MIB MiB): Xet job claimed by $(xet_claimant "$(events_since "$ev")")in $one s; $((x1 - x0)) xorb bytes, $((b1 - b0)) bridge bytes, $((r1 - r0)) reconstructions"
    check "G: revision 1 came natively (reconstructions, no bridge bytes)" test "$((r1 - r0))" -ge 1 -a "$((b1 - b0))" -eq 0
    # Revision 2: a new commit of the same repo on the Hub, stored in its CAS before anyone asks.
    size=$(stat -c %s "$src")
    local at=$((size * 2 / 5)) tmp="$WORK/g-revision-2"
    { head -c "$at" "$src"; head -c 1024 /dev/urandom; tail -c +"$((at + 1))" "$src"; } >"$tmp"
    head -c 16 /dev/urandom | dd of="$tmp" bs=1 seek="$((size * 7 / 10))" conv=notrunc status=none
    mv "$tmp" "$src"
    size=$(stat -c %s "$src")
    warm_repo "$repo"
    c1=$(xet_counters); read -r x1 b1 r1 <<<"$c1"
    ev=$(events_mark)
    download_on 2 "$repo" "$LOGS/g2-download-node2.log"
    local two=$DL_SECONDS
    check "G: revision 2 on node2 exits 0 ($two s)" test "$DL_RC" -eq 0
    check "G: revision 2 verifies" verify_file "$repo" "$FILE"
    c2=$(xet_counters); read -r x2 b2 r2 <<<"$c2"
    local served=$((x2 - x1)) pct
    pct=$(awk -v s="$served" -v n="$size" 'BEGIN { printf "%.2f", 100 * s / n }')
    figure "G: revision 2 ($size bytes): Xet job claimed by $(xet_claimant "$(events_since "$ev")")in $two s; $served xorb bytes served ($pct %), $((b2 - b1)) bridge bytes"
    check "G: revision 2 fetched at most 2 % of its bytes from the CAS ($served of $size: $pct %)" \
        eval "[[ $served -gt 0 ]] && le '$pct' 2"
    check "G: no bridge bytes for revision 2" test "$((b2 - b1))" -eq 0
    want=$(sha256sum <"$src" | cut -d' ' -f1)
    for i in 1 2; do
        local got; got=$(sha_on_node "$i" "$repo")
        check "G: the file reads byte-identical through node$i's mount" test "$got" == "$want"
    done
    report_revocations G "$(events_since "$ev")"
    check "G: no claim revoked (no node died)" test -z "$(revocations "$(events_since "$ev")")"
    check_locks G "$(events_since "$ev")"
}
