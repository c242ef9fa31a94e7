# evict.sh - cluster-test's scenario F, sourced by scripts/cluster-test: node1's size cap evicts
# a model that node2 has open. node2's open file reads to its end (the model was renamed into
# models/.evicted/, not unlinked), node2's next load gets a clear error offline and a fresh
# download online, and the evicted folder is deleted only once the grace period has passed
# (docs/cluster.md, "Size cap on a shared cache").
scenario_f() {
    local repo=cluster/scenario-f dir="$BACKING/models/cluster/scenario-f" rc=0 rcr=0 reader want got t0
    t0=$(now)
    say "F: node1 evicts ($F_MIB MiB) a model node2 has open, on $CLUSTER_FS"
    cap_links off
    for i in 1 2; do kill -0 "${DAEMON_PID[$i]:-0}" 2>/dev/null || { local t; t=$(now); start_node "$i"; wait_heartbeat "$i" "$t"; }; done
    download_on 1 "$repo" "$LOGS/f-download-node1.log"
    check "F: node1 downloads $repo" test "$DL_RC" -eq 0
    want=$(sha256sum <"$WORK/hub/$repo/$FILE" | cut -d' ' -f1)
    # Last used five hours ago: its use record, manifest and folder, re-timed through node1's mount
    # (GlusterFS keeps times of its own: a brick's are not the volume's). The other scenarios'
    # models are younger than the grace period and stay.
    local m="$CACHE/models/$repo"
    node_spawn "$LOGS/f-age-node1.log" 1 -- touch -d '5 hours ago' "$m/.speech-fetch-used" "$m/.speech-fetch.json" "$m"
    wait "$SPAWNED" || true
    # node2 opens the file, and reads it only after node1 evicted the model.
    node_spawn "$LOGS/f-reader-node2.log" 2 -- sh -c 'exec 3<"$1" && echo opened && sleep 4 && sha256sum <&3' \
        sh "$CACHE/models/$repo/$FILE"
    reader=$SPAWNED
    for _ in $(seq 1 100); do grep -q opened "$LOGS/f-reader-node2.log" && break; sleep 0.1; done
    node_spawn "$LOGS/f-prune-node1.log" 1 -- speech cache prune --max-size 1K --cache-base "$CACHE"
    wait "$SPAWNED" || rc=$?
    check "F: node1's prune evicts it into models/.evicted/" eval "[[ $rc == 0 && ! -e '$dir' ]] && grep -q 'evicted $repo' '$LOGS/f-prune-node1.log' && ls '$BACKING/models/.evicted' | grep -q scenario-f"
    wait_pid "$reader" 30 || rcr=$?
    got=$(grep -o '^[0-9a-f]\{64\}' "$LOGS/f-reader-node2.log" || true)
    check "F: node2's reader, opened before the eviction, reads every byte after it" test "$rcr" -eq 0 -a "$got" == "$want"
    sleep 1.5  # node2's client may serve the old name for its entry timeout (1 s)
    rc=0
    node_spawn "$LOGS/f-offline-node2.log" 2 -- speech download "$repo" --offline --cache-base "$CACHE"
    wait "$SPAWNED" || rc=$?
    check "F: node2's offline load after the eviction fails with a clear error (exit $rc)" \
        eval "[[ $rc == 1 ]] && grep -q 'offline' '$LOGS/f-offline-node2.log'"
    download_on 2 "$repo" "$LOGS/f-download-node2.log"
    check "F: node2's online load downloads it afresh and it verifies" eval "[[ $DL_RC == 0 ]] && verify_file $repo $FILE"
    rc=0
    node_spawn "$LOGS/f-purge-node2.log" 2 -- speech cache prune --max-size 1G --grace 0 --cache-base "$CACHE"
    wait "$SPAWNED" || rc=$?
    check "F: node2's prune deletes the evicted folder once the grace period (0 here) has passed" \
        eval "[[ $rc == 0 && -z \"\$(ls -A '$BACKING/models/.evicted' 2>/dev/null)\" ]] && verify_file $repo $FILE"
    figure "F: took $(elapsed "$t0" "$(now)") s"
}
