# scripts/cluster.d/lib.sh - the pieces of scripts/cluster-test: namespaces, mounts, nodes,
# the test Hub, the spool event log, and the cleanup that undoes all of it. Sourced, not run.
# scripts/cluster-scale uses the GlusterFS, node and Hub pieces without network namespaces
# (NODE_NETNS=0, HUB_NS empty: every node and the Hub in the root network namespace).
#
# Layout (every name below is owned by one run; a lock file keeps runs from overlapping):
#
#   netns sfhub   lo 10.77.0.1/32; speech-testhub on 127.0.0.1:$HUB_PORT (Hub) and :$CDN_PORT (CDN),
#                 which is all it can bind, so socat forwards 10.77.0.1:P -> 127.0.0.1:P
#   netns sfnI    veth sfvI 10.77.I.2/24 <-> sfhI 10.77.I.1/24 in sfhub; socat forwards
#                 127.0.0.1:P -> 10.77.0.1:P, so the Hub's URLs (and its CDN redirects, which name
#                 127.0.0.1) work unchanged on every node; tc tbf on sfhI caps what node I receives
#   $WORK/backing            the one shared directory (the "NFS export"); with CLUSTER_FS=gluster
#                            the brick of a one-brick GlusterFS volume (only ever read directly)
#   $WORK/mnt/nodeI          node I's own mount of it (the "NFS client mount"): bindfs FUSE, or
#                            with CLUSTER_FS=gluster a `mount -t glusterfs` of the volume
#   $CACHE                   the path every node sees its mount at (bind-mounted in the node's
#                            private mount namespace), as a cluster mounts its share at one path

HUB_NS=sfhub
HUB_ADDR=10.77.0.1
HUB_PORT=18080
CDN_PORT=18081
NODE_COUNT=3
# 1: every node process runs in its network namespace sfnI; 0: in the root one (cluster-scale).
NODE_NETNS=1
CLUSTER_FS=${CLUSTER_FS:-bindfs}
GLUSTER_VOLUME=sfcluster
GLUSTERD_PID=""
GLUSTER_VOLUME_MADE=""
# Another GlusterFS harness of this project (scripts/cluster-scale) on this machine holds it while
# its glusterd runs: only one glusterd can run at a time.
GLUSTER_LOCK=/tmp/speech-fetch-gluster.lock
SAY_PREFIX=cluster-test
# Lease and poll the nodes run with (SPEECH_FETCH_LEASE_SECONDS, SPEECH_FETCH_POLL_SECONDS); empty:
# the daemon's defaults (the variable is not set).
LEASE=""
POLL=""

WORK=""
LOGS=""
CACHE=""
BACKING=""
SPOOL=""
BIN=""
LOCK_FD=""
HUB_PID=""
EVENTS_PID=""
declare -a BINDFS_PIDS=()
declare -a MOUNTS=()
declare -a NAMESPACES=()
declare -A DAEMON_PID=()
declare -A FORWARDING=()
KILLED=""
KILLED_AT=""

# say, die (and the helpers every script shares); packages_install, the one apt-get installer.
# shellcheck source=../lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
# shellcheck source=../lib/packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/packages.sh"
now() { printf '%s\n' "$EPOCHREALTIME"; }
# Seconds between two EPOCHREALTIME stamps, 2 decimals.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# ---------------------------------------------------------------- requirements

install_requirements() {
    local missing=()
    command -v ip >/dev/null || missing+=(iproute2)
    command -v tc >/dev/null || missing+=(iproute2)
    command -v bindfs >/dev/null || missing+=(bindfs)
    command -v fusermount3 >/dev/null || missing+=(fuse3)
    command -v faketime >/dev/null || missing+=(faketime)
    command -v pgrep >/dev/null || missing+=(procps)
    command -v socat >/dev/null || missing+=(socat)
    command -v inotifywait >/dev/null || missing+=(inotify-tools)
    command -v curl >/dev/null || missing+=(curl)
    command -v unshare >/dev/null || missing+=(util-linux)
    if [[ "$CLUSTER_FS" == gluster ]]; then
        command -v glusterd >/dev/null || missing+=(glusterfs-server)
        command -v mount.glusterfs >/dev/null || [[ -x /sbin/mount.glusterfs ]] || missing+=(glusterfs-client)
    fi
    apt_install "${missing[@]}"
    [[ -e /dev/fuse ]] || die "/dev/fuse is missing: bindfs needs FUSE (run the container with --device /dev/fuse)"
    case "$CLUSTER_FS" in
        bindfs | gluster) ;;
        *) die "CLUSTER_FS=$CLUSTER_FS: use bindfs or gluster" ;;
    esac
}

# find_binaries DIR: BIN is DIR when one is given, else speech, speech-fetchd and speech-testhub
# are built (debug, at a lower priority) and BIN is their folder; dies when one is missing.
find_binaries() {
    if [[ -n "$1" ]]; then
        BIN=$(cd "$1" && pwd)
    else
        say "building speech, speech-fetchd, speech-testhub (debug)"
        local product out
        for product in speech speech-fetchd speech-testhub; do
            if ! out=$(cd "$ROOT" && nice -n 10 swift build --product "$product" 2>&1); then
                grep -E "error:" <<<"$out" | head -20 >&2
                die "swift build --product $product failed"
            fi
        done
        BIN=$(cd "$ROOT" && swift build --show-bin-path)
    fi
    local b
    for b in speech speech-fetchd speech-testhub; do [[ -x "$BIN/$b" ]] || die "missing $BIN/$b"; done
}

# ---------------------------------------------------------------- cleanup

# Kills every process in a network namespace: TERM, then KILL after a grace period.
kill_namespace() {
    local ns=$1 pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n "$pids" ]] || return 0
    kill -TERM $pids 2>/dev/null || true
    for _ in $(seq 1 30); do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [[ -n "$pids" ]] || return 0
        sleep 0.1
    done
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
}

cleanup() {
    local status=$?
    set +e
    trap - EXIT INT TERM
    [[ -n "${CLUSTER_CLEANUP_DONE:-}" ]] && return
    CLUSTER_CLEANUP_DONE=1
    for i in $(seq 1 "$NODE_COUNT"); do kill_namespace "sfn$i"; done
    kill_namespace "$HUB_NS"
    [[ -n "$EVENTS_PID" ]] && kill -TERM -- "-$EVENTS_PID" 2>/dev/null
    local m
    for m in "${MOUNTS[@]}"; do
        fusermount3 -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
    local p
    for p in "${BINDFS_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    gluster_teardown
    local ns
    for ns in "${NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null; done
    remove_work "$status" "${CLUSTER_LOG_DIR:-}" "${TMPDIR:-/tmp}/speech-fetch-cluster-logs.$$"
    exit "$status"
}

# remove_work STATUS LOG_DIR FALLBACK: the last step of both harnesses' cleanup. Copies $LOGS into
# LOG_DIR when one is given, else into FALLBACK when STATUS says the run failed; then removes
# $WORK (nothing when there is none).
remove_work() {
    local status=$1 log_dir=$2 fallback=$3
    [[ -n "$WORK" && -d "$WORK" ]] || return 0
    if [[ $status -ne 0 || -n "$log_dir" ]]; then
        local keep=${log_dir:-$fallback}
        mkdir -p "$keep" && cp -r "$LOGS"/. "$keep"/ 2>/dev/null && say "logs kept in $keep"
    fi
    # Only once nothing is mounted below it (a live FUSE mount would be walked into).
    if ! grep -q " $WORK/" /proc/mounts; then rm -rf "$WORK"; else say "left $WORK: still mounted"; fi
}

# ---------------------------------------------------------------- set-up

# cluster-test's lock, and with CLUSTER_FS=gluster the GlusterFS lock too (scripts/cluster-scale
# takes both, so the two never overlap, and no other glusterd harness runs beside either).
take_lock() {
    exec {LOCK_FD}>/run/speech-fetch-cluster-test.lock
    flock -n "$LOCK_FD" || die "another scripts/cluster-test or scripts/cluster-scale is running (lock /run/speech-fetch-cluster-test.lock)"
    if [[ "$CLUSTER_FS" == gluster ]]; then
        local fd
        exec {fd}>"$GLUSTER_LOCK"
        flock -n "$fd" || die "another GlusterFS harness is running (lock $GLUSTER_LOCK)"
    fi
}

# Namespaces left by a run that was killed with SIGKILL (the lock says none is running now).
remove_stale() {
    local ns
    for ns in "$HUB_NS" $(seq -f 'sfn%g' 1 "$NODE_COUNT"); do
        if ip netns list | grep -qw "^$ns"; then
            say "removing namespace $ns left by an earlier run"
            kill_namespace "$ns"
            ip netns del "$ns"
        fi
    done
    local m
    for m in $(awk '$2 ~ "/speech-fetch-cluster\\.[^/]*/mnt/node" { print $2 }' /proc/mounts | sort -u); do
        say "unmounting $m left by an earlier run"
        fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
    done
}

make_work() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/speech-fetch-cluster.XXXXXX")
    LOGS="$WORK/logs"
    BACKING="$WORK/backing"
    CACHE="$WORK/cache"
    SPOOL="$BACKING/spool"
    mkdir -p "$LOGS" "$BACKING" "$CACHE" "$WORK/hub"
}

setup_network() {
    ip netns add "$HUB_NS"; NAMESPACES+=("$HUB_NS")
    ip -n "$HUB_NS" link set lo up
    ip -n "$HUB_NS" addr add "$HUB_ADDR/32" dev lo
    local i
    for i in $(seq 1 "$NODE_COUNT"); do
        ip netns add "sfn$i"; NAMESPACES+=("sfn$i")
        ip -n "sfn$i" link set lo up
        ip link add "sfh$i" netns "$HUB_NS" type veth peer name "sfv$i" netns "sfn$i"
        ip -n "$HUB_NS" addr add "10.77.$i.1/24" dev "sfh$i"
        ip -n "$HUB_NS" link set "sfh$i" up
        ip -n "sfn$i" addr add "10.77.$i.2/24" dev "sfv$i"
        ip -n "sfn$i" link set "sfv$i" up
        ip -n "sfn$i" route add "$HUB_ADDR/32" via "10.77.$i.1"
    done
}

# socat forwarders: in the hub namespace from 10.77.0.1 to the loopback the Hub listens on; in a
# node's namespace from its loopback (the address in every Hub URL) to 10.77.0.1.
forward() {
    local ns=$1 bind=$2 target=$3 port
    for port in "$HUB_PORT" "$CDN_PORT"; do
        ip netns exec "$ns" socat -b 262144 "TCP-LISTEN:$port,bind=$bind,reuseaddr,fork" "TCP:$target:$port" \
            </dev/null >>"$LOGS/socat-$ns.log" 2>&1 &
    done
}

# The test Hub in its namespace, serving the repos named by "repo:path=SIZE" arguments (with
# HUB_FAULTS set, the faults file it names: docs/testhub.md).
# With HUB_NS empty it runs in the root network namespace, without forwarders (HUB_PORT and
# CDN_PORT 0 then pick free ports; hub_url says which).
start_hub() {
    local generate=() spec in_ns=()
    for spec in "$@"; do generate+=(--generate "$spec"); done
    [[ -z "${HUB_FAULTS:-}" ]] || generate+=(--faults "$HUB_FAULTS")
    # Repos served through Xet (cluster-test G): the rest keep the plain CDN path.
    for spec in ${HUB_XET_REPOS:-}; do generate+=(--xet-repo "$spec"); done
    [[ -z "$HUB_NS" ]] || in_ns=(ip netns exec "$HUB_NS")
    "${in_ns[@]}" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$BIN/speech-testhub" --root "$WORK/hub" \
        --port "$HUB_PORT" --cdn-port "$CDN_PORT" --cdn-host 127.0.0.1 --log "${generate[@]}" \
        </dev/null >"$LOGS/hub.url" 2>"$LOGS/hub.log" &
    HUB_PID=$!
    for _ in $(seq 1 600); do
        [[ -s "$LOGS/hub.url" ]] && break
        kill -0 "$HUB_PID" 2>/dev/null || die "speech-testhub exited: $(tail -5 "$LOGS/hub.log")"
        sleep 0.1
    done
    [[ -s "$LOGS/hub.url" ]] || die "speech-testhub printed no URL"
    [[ -z "$HUB_NS" ]] || forward "$HUB_NS" "$HUB_ADDR" 127.0.0.1
}

# The Hub's URL as every node uses it (HF_ENDPOINT): the address it printed.
hub_url() { head -1 "$LOGS/hub.url"; }

# Asks for a repo's tree once from the hub namespace, so its digests are computed before timing.
warm_repo() {
    local in_ns=()
    [[ -z "$HUB_NS" ]] || in_ns=(ip netns exec "$HUB_NS")
    "${in_ns[@]}" curl -sf -o /dev/null "$(hub_url)/api/models/$1/tree/main?recursive=true" \
        || die "the Hub does not list $1"
}

setup_mounts() {
    if [[ "$CLUSTER_FS" == gluster ]]; then setup_gluster; else setup_bindfs; fi
    # Made through a mount (a brick is never written directly): the event log watches it.
    mkdir -p "${MOUNTS[0]}/models"
}

# ---------------------------------------------------------------- GlusterFS

# The gluster CLI against our own glusterd, without prompts.
gluster_cli() { timeout 60 gluster --mode=script "$@"; }

# Our own glusterd (foreground, so its pid is ours to stop), a one-brick volume on $BACKING named by
# the host name (the CLI refuses 127.0.0.1 and localhost bricks), with the volume's default
# options, and one FUSE client mount per node.
setup_gluster() {
    gluster_start
    gluster_volume_up "$BACKING"
    gluster_mount_nodes "$NODE_COUNT"
}

# Our own glusterd, foreground (-N): its pid is ours to stop.
gluster_start() {
    local other
    other=$(pgrep -x glusterd || true)
    [[ -z "$other" ]] || die "a glusterd runs already (pid $other): stop it, or run with CLUSTER_FS=bindfs"
    glusterd -N --log-file="$LOGS/glusterd.log" </dev/null >>"$LOGS/glusterd.out" 2>&1 &
    GLUSTERD_PID=$!
    local up=""
    for _ in $(seq 1 100); do
        gluster_cli pool list >/dev/null 2>&1 && { up=1; break; }
        kill -0 "$GLUSTERD_PID" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n "$up" ]] || die "glusterd did not start: $(tail -5 "$LOGS/glusterd.log" 2>/dev/null)"
}

# gluster_volume_up BRICK: the one-brick volume $GLUSTER_VOLUME on BRICK (a directory), started,
# with the volume's default options (one left by an earlier run is removed first).
gluster_volume_up() {
    local brick=$1
    if gluster_cli volume info "$GLUSTER_VOLUME" >/dev/null 2>&1; then
        say "removing volume $GLUSTER_VOLUME left by an earlier run"
        gluster_cli volume stop "$GLUSTER_VOLUME" force >/dev/null 2>&1 || true
        gluster_cli volume delete "$GLUSTER_VOLUME" >/dev/null 2>&1 || true
    fi
    local host; host=$(hostname)
    gluster_cli volume create "$GLUSTER_VOLUME" "$host:$brick" force >>"$LOGS/gluster-cli.log" 2>&1 \
        || die "gluster volume create failed: $(tail -3 "$LOGS/gluster-cli.log")"
    GLUSTER_VOLUME_MADE=1
    gluster_cli volume start "$GLUSTER_VOLUME" >>"$LOGS/gluster-cli.log" 2>&1 \
        || die "gluster volume start failed: $(tail -3 "$LOGS/gluster-cli.log")"
    gluster_cli volume info "$GLUSTER_VOLUME" >"$LOGS/gluster-volume-info.txt" 2>&1 || true
}

# gluster_mount_nodes COUNT: one FUSE client mount of the volume per node, $WORK/mnt/node1..COUNT.
gluster_mount_nodes() {
    local count=$1 host i m
    host=$(hostname)
    for i in $(seq 1 "$count"); do
        m="$WORK/mnt/node$i"
        mkdir -p "$m"
        # No options but the log: the client's defaults (attribute and entry timeouts of 1 s, no
        # negative caching) and the volume's default performance translators. The nodes named in
        # GLUSTER_TRACE_NODES log at TRACE: every FOP the client sends, with its path.
        local opts="log-file=$LOGS/gluster-node$i.log"
        [[ " ${GLUSTER_TRACE_NODES:-} " != *" $i "* ]] || opts+=",log-level=TRACE"
        mount -t glusterfs -o "$opts" "$host:/$GLUSTER_VOLUME" "$m" \
            || die "mount -t glusterfs $host:/$GLUSTER_VOLUME $m failed: $(tail -3 "$LOGS/gluster-node$i.log" 2>/dev/null)"
        MOUNTS+=("$m")
        mountpoint -q "$m" || die "$m is not mounted"
    done
}

# Stops and deletes the volume, stops our glusterd (nothing when not made). The client mounts must
# be gone first (cleanup unmounts them).
gluster_teardown() {
    [[ -n "$GLUSTERD_PID" ]] || return 0
    gluster_volume_down
    kill -TERM "$GLUSTERD_PID" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$GLUSTERD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$GLUSTERD_PID" 2>/dev/null
    wait "$GLUSTERD_PID" 2>/dev/null
    GLUSTERD_PID=""
}

# The pids of our volume's brick processes. The CLI wraps a long brick name onto a second line,
# so the pid is the last field of the first line from "Brick" on that ends in "Y|N <pid>".
gluster_brick_pids() {
    { gluster_cli volume status "$GLUSTER_VOLUME" 2>/dev/null || true; } |
        awk '/^Brick / { b = 1 } b && $(NF - 1) ~ /^[YN]$/ && $NF ~ /^[0-9]+$/ { print $NF; b = 0 }'
}

# Stops and deletes our volume and stops its brick process (nothing when not made).
gluster_volume_down() {
    [[ -n "$GLUSTER_VOLUME_MADE" ]] || return 0
    local bricks b
    bricks=$(gluster_brick_pids)
    gluster_cli volume stop "$GLUSTER_VOLUME" force >/dev/null 2>&1 || true
    gluster_cli volume delete "$GLUSTER_VOLUME" >/dev/null 2>&1 || true
    for b in $bricks; do kill -0 "$b" 2>/dev/null && kill -TERM "$b" 2>/dev/null; done
    GLUSTER_VOLUME_MADE=""
    return 0
}

setup_bindfs() {
    local i m
    for i in $(seq 1 "$NODE_COUNT"); do
        m="$WORK/mnt/node$i"
        mkdir -p "$m"
        # Attribute and entry caches of one second, no negative caching: an NFS client mounted
        # with actimeo=1,lookupcache=positive. Foreground, so its pid is ours to stop.
        bindfs -f --multithreaded -o entry_timeout=1,attr_timeout=1,negative_timeout=0 "$BACKING" "$m" \
            </dev/null >>"$LOGS/bindfs-node$i.log" 2>&1 &
        BINDFS_PIDS+=($!)
        MOUNTS+=("$m")
    done
    for m in "${MOUNTS[@]}"; do
        for _ in $(seq 1 100); do mountpoint -q "$m" && break; sleep 0.05; done
        mountpoint -q "$m" || die "bindfs did not mount $m: $(tail -3 "$LOGS"/bindfs-*.log)"
    done
}

# ---------------------------------------------------------------- nodes

# The environment every node process gets (nothing from the caller's, so no token leaks in).
# The Hub is at 127.0.0.1 in every node's namespace (forwarded), or in the root one (HUB_NS empty).
# LEASE and POLL set the lease and poll interval; left empty, the daemon's defaults apply.
# CLUSTER_JOB_WINDOW, when set, is every node's job window (ranges of one file in flight).
# SPEECH_FETCH_RANGES_IN_PLACE, when set, is passed to every node (docs/protocol.md, "Ranges written in place").
node_env() {
    local i=$1
    printf '%s\n' "PATH=$BIN:/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$WORK/home$i" "LANG=C.UTF-8" \
        "HF_ENDPOINT=$(hub_endpoint)" "HF_HUB_OFFLINE=0"
    [[ -z "$LEASE" ]] || printf '%s\n' "SPEECH_FETCH_LEASE_SECONDS=$LEASE"
    [[ -z "$POLL" ]] || printf '%s\n' "SPEECH_FETCH_POLL_SECONDS=$POLL"
    [[ -z "${CLUSTER_JOB_WINDOW:-}" ]] || printf '%s\n' "SPEECH_FETCH_JOB_WINDOW=$CLUSTER_JOB_WINDOW"
    [[ -z "${SPEECH_FETCH_RANGES_IN_PLACE:-}" ]] || printf '%s\n' "SPEECH_FETCH_RANGES_IN_PLACE=$SPEECH_FETCH_RANGES_IN_PLACE"
}
hub_endpoint() {
    if [[ -z "$HUB_NS" && -s "$LOGS/hub.url" ]]; then hub_url; else printf 'http://127.0.0.1:%s\n' "$HUB_PORT"; fi
}

# node_argv I [VAR=value... | prefix command...] -- command...: sets NODE_ARGV to the command line
# that runs a command as node I: its network namespace (with NODE_NETNS=1), its own UTS namespace
# with host name nodeI, a private mount namespace where its own FUSE mount sits at $CACHE, and a
# clean environment. Every step execs the next, so a background NODE_ARGV's pid ($!) is the
# command's own pid.
NODE_ARGV=()
node_argv() {
    local i=$1; shift
    local extra=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do extra+=("$1"); shift; done
    shift
    mkdir -p "$WORK/home$i"
    local env=()
    mapfile -t env < <(node_env "$i")
    NODE_ARGV=()
    [[ "$NODE_NETNS" != 1 ]] || NODE_ARGV=(ip netns exec "sfn$i")
    NODE_ARGV+=(unshare --uts --mount --propagation private
        env -i "${env[@]}" "${extra[@]}" sh -c
        'mount --bind "$1" "$2" && echo "$3" >/proc/sys/kernel/hostname && shift 3 && exec "$@"'
        sh "$WORK/mnt/node$i" "$CACHE" "node$i" "$@")
}

# node_spawn LOG I ... -- command...: runs it as node I in the background; SPAWNED is its pid.
SPAWNED=""
node_spawn() {
    local log=$1; shift
    node_argv "$@"
    "${NODE_ARGV[@]}" </dev/null >>"$log" 2>&1 &
    SPAWNED=$!
}

# The variables `faketime -f OFFSET` sets, for a process that must keep its own pid (the faketime
# wrapper forks and would outlive a SIGTERM to it): libfaketime preloaded (its thread-safe
# build: the daemon is multithreaded), the offset, a real monotonic clock, and FAKE_UTIME=1 so
# utimensat(NULL) stamps the kernel's time, as an NFS server stamps its own (SET_TO_SERVER_TIME)
# whatever the client's clock says; without it libfaketime stamps the skewed time, which no NFS
# client can do.
skew_env() {
    local lib
    lib=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 /usr/lib/faketime/libfaketimeMT.so.1 2>/dev/null | head -1)
    [[ -n "$lib" ]] || die "libfaketimeMT.so.1 not found (package libfaketime)"
    printf '%s\n' "LD_PRELOAD=$lib" "FAKETIME=$1" "FAKETIME_DONT_FAKE_MONOTONIC=1" "FAKE_UTIME=1"
}

# start_node I [faketime offset]: node I's forwarders and speech-fetchd (4 workers).
start_node() {
    local i=$1 skew=${2:-}
    if [[ -z "${FORWARDING[$i]:-}" ]]; then
        forward "sfn$i" 127.0.0.1 "$HUB_ADDR"
        FORWARDING[$i]=1
    fi
    local log="$LOGS/fetchd-node$i.log"
    if [[ -n "$skew" ]]; then
        say "node$i: speech-fetchd under faketime $skew"
        node_spawn "$log" "$i" $(skew_env "$skew") -- \
            speech-fetchd --cache-base "$CACHE" --node "node$i" --workers "$WORKERS" --slots 1
    else
        node_spawn "$log" "$i" -- speech-fetchd --cache-base "$CACHE" --node "node$i" --workers "$WORKERS" --slots 1
    fi
    DAEMON_PID[$i]=$SPAWNED
}

# Waits until node I's supervisor has written its heartbeat after `since` (EPOCHREALTIME).
wait_heartbeat() {
    local i=$1 since=$2 beat
    for _ in $(seq 1 200); do
        beat=$(stat -c %.3Y "$SPOOL/supervisors/node$i" 2>/dev/null || echo 0)
        awk -v b="$beat" -v s="$since" 'BEGIN { exit !(b >= s) }' && return 0
        kill -0 "${DAEMON_PID[$i]}" 2>/dev/null || die "node$i: speech-fetchd exited: $(tail -5 "$LOGS/fetchd-node$i.log")"
        sleep 0.1
    done
    die "node$i: no heartbeat from speech-fetchd"
}

# SIGTERM to node I's supervisor (it drains its workers) and wait for it.
stop_node() {
    local i=$1 pid=${DAEMON_PID[$1]:-}
    [[ -n "$pid" ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && die "node$i: speech-fetchd did not stop on SIGTERM"
    wait "$pid" 2>/dev/null || true
    DAEMON_PID[$i]=""
}

# SIGKILL to every process of node I (supervisor, workers, clients, forwarders): the node dies.
# Sets KILLED to the pids.
kill_node() {
    KILLED=$(ip netns pids "sfn$1")
    [[ -z "$KILLED" ]] || kill -KILL $KILLED 2>/dev/null || true
    KILLED_AT=$EPOCHREALTIME
    for _ in $(seq 1 50); do [[ -z "$(ip netns pids "sfn$1")" ]] && break; sleep 0.05; done
    wait "${DAEMON_PID[$1]}" 2>/dev/null || true
    DAEMON_PID[$1]=""
    FORWARDING[$1]=""
}

# Bytes node I has received on its link (everything from the Hub, headers included).
node_rx_bytes() { ip netns exec "sfn$1" cat "/sys/class/net/sfv$1/statistics/rx_bytes"; }

# cap RATE|off: a token bucket on the Hub's side of every node's link (what the node receives).
cap_links() {
    local rate=$1 i
    for i in $(seq 1 "$NODE_COUNT"); do
        if [[ "$rate" == off ]]; then
            ip netns exec "$HUB_NS" tc qdisc del dev "sfh$i" root 2>/dev/null || true
        else
            ip netns exec "$HUB_NS" tc qdisc replace dev "sfh$i" root tbf rate "$rate" burst 256kb latency 200ms
        fi
    done
}

# ---------------------------------------------------------------- observation

# Every claim (MOVED_TO claimed/), revocation or give-back (MOVED_FROM), publish/drop (DELETE) and
# done marker (CREATE done/), stamped, as seen on the backing directory, which sees every node's
# writes (each node's own mount does not).
start_events() {
    setsid bash "$ROOT/scripts/cluster.d/spool-events" "$BACKING" >"$LOGS/events.log" 2>"$LOGS/events.err" </dev/null &
    EVENTS_PID=$!
    for _ in $(seq 1 50); do grep -q 'Watches established' "$LOGS/events.err" 2>/dev/null && return; sleep 0.1; done
}

events_mark() { wc -l <"$LOGS/events.log"; }

# Staging locks broken in an events window, one line each: "<holder> <breaker> <seconds held> <at>".
# The holder is the node@pid the lock named when it was written; the breaker comes from the name
# StagingLock renames a lock to before unlinking it (<lock>.broken.<node>.<pid>.<random>).
lock_breaks() {
    awk '
        $2 ~ /^CLOSE_WRITE/ && $3 ~ /\.lock$/ { holder[$3] = $4; since[$3] = $1 }
        $2 == "MOVED_FROM" && $3 ~ /\.lock$/ { h = ($3 in holder) ? holder[$3] : "?"; s = ($3 in since) ? since[$3] : $1; at = $1 }
        $2 == "MOVED_TO" && $3 ~ /\.lock\.broken\./ {
            n = $3; sub(/.*\.lock\.broken\./, "", n); split(n, p, ".")
            printf "%s %s@%s %.2f %s\n", h, p[1], p[2], at - s, at
        }' <<<"$1"
}

# Waits (at most 30 s) until no range is ready or claimed: late work (a range planned again after
# the file was final) belongs to the scenario that caused it.
settle() {
    for _ in $(seq 1 60); do
        if [[ -z "$(ls -A "$SPOOL/jobs/ready" "$SPOOL/jobs/claimed" 2>/dev/null | grep -v ':$' | grep .)" ]]; then
            sleep 0.5
            [[ -z "$(ls -A "$SPOOL/jobs/ready" "$SPOOL/jobs/claimed" 2>/dev/null | grep -v ':$' | grep .)" ]] && return 0
        fi
        sleep 0.5
    done
    say "the spool did not settle: $(ls "$SPOOL/jobs/ready" "$SPOOL/jobs/claimed" | tr '\n' ' ')"
}
events_since() { tail -n +"$(($1 + 1))" "$LOGS/events.log"; }

# Lines of the Hub's request log so far, and the CDN GETs of one repo's file after a mark.
hub_mark() { wc -l <"$LOGS/hub.log"; }
cdn_gets_since() { tail -n +"$(($1 + 1))" "$LOGS/hub.log" | grep -c "cdn GET /cdn/$2/" || true; }

# The request id (spool/requests/<rid>.json) for a repo, once some node wrote it.
request_id() {
    local f
    for f in "$SPOOL"/requests/*.json; do
        [[ -e "$f" ]] || continue
        # JSONEncoder writes "/" as "\/".
        grep -qF -e "\"repo\":\"$1\"" -e "\"repo\":\"${1//\//\\/}\"" "$f" && { basename "$f" .json; return 0; }
    done
    return 0
}

wait_request() {
    local rid
    for _ in $(seq 1 300); do
        rid=$(request_id "$1")
        [[ -n "$rid" ]] && { printf '%s\n' "$rid"; return; }
        sleep 0.05
    done
    die "no request for $1 appeared in the spool"
}

# sha256 of the Hub's copy against the cache's.
verify_file() {
    local repo=$1 path=$2 want got
    want=$(sha256sum <"$WORK/hub/$repo/$path" | cut -d' ' -f1)
    got=$(sha256sum <"$BACKING/models/$repo/$path" 2>/dev/null | cut -d' ' -f1)
    [[ -n "$got" && "$want" == "$got" ]]
}

# ---------------------------------------------------------------- checks and figures

FAILED=0
declare -a SUMMARY=()
check() {  # check "what" command...
    local what=$1; shift
    if "$@"; then say "ok:   $what"; SUMMARY+=("ok    $what"); else say "FAIL: $what"; SUMMARY+=("FAIL  $what"); FAILED=1; fi
}
figure() { SUMMARY+=("      $*"); say "$*"; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
