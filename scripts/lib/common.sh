# common.sh - the shell helpers more than one script of scripts/ needs; sourced, never run.
#
#   say TEXT...       a line on stderr, named after the script ($SAY_PREFIX, else its file name)
#   die TEXT...       says "FAILED: TEXT" and exits 1
#   stop_pid PID      TERM, up to 5 s for it to go, then KILL (nothing when it is gone already)
#   stop_nginx PID    nginx's master (TERM: its fast shutdown, connections closed at once) and
#                     its workers, waited for
#   make_work NAME [KEEP]  $work, a new ${TMPDIR:-/tmp}/NAME.XXXXXX; at the script's end (EXIT;
#                     INT and TERM exit 130) the pids stop_at_exit names stop, at_exit's commands
#                     run, and $work goes (kept, and said, when the variable named KEEP is set)
#   stop_at_exit VARIABLE...  the pids these variables or arrays hold at the end: stop_pid, reaped
#   at_exit COMMAND   one more step at the end (eval'd then), before $work goes
#   start_nginx DIR URL  nginx on DIR/nginx.conf (prefix DIR, logs in DIR/logs), stopped at the
#                     end; waits 5 s for URL to answer: sets nginx_pid, or dies with its error log
#   debug_bin_dir PRODUCT...  builds them (debug; TESTHUB_SCRATCH_PATH as --scratch-path) and
#                     prints their folder; a failed build's errors go to stderr
#   start_testhub BINARY OUT ERR ARG...
#                     BINARY (a speech-testhub) with ARG... in the background, stdout to OUT and
#                     stderr to ERR; waits up to 30 s for its first line, the Hub's URL: sets
#                     testhub_pid and testhub_url, or dies (with its stderr) when it exits first
#                     or names no loopback URL
#   release_binary PRODUCT
#                     builds PRODUCT as bin/launch does (release, --static-swift-stdlib; with
#                     BENCH_SCRATCH_PATH as --scratch-path) and prints the binary's path
#   ensure_venv DIR CHECK REQUIREMENT...
#                     a Python venv at DIR in which the Python code CHECK runs; when it does not,
#                     the venv is made (if missing) and REQUIREMENT... installed from PyPI
#   hf_client_lines   the huggingface_hub lines every check runs against: "1.x" (the newest 1.x:
#                     huggingface_hub<2) and "latest" (the latest release); HF_CLIENT_LINES="latest"
#                     (space-separated) runs a subset
#   hf_client_python LINE
#                     creates or updates that line's venv; prints its python. Venvs:
#                     ${HUB_FIDELITY_VENV:-${TMPDIR:-/tmp}/speech-fetch-hub-fidelity-venv}-<line>,
#                     kept between runs (pip upgrades them to the newest release of their line
#                     each time)
# The Python helpers' counterpart is scripts/lib/common.py; the Debian packages' is
# scripts/lib/packages.sh.

common_repo_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

say() { printf '%s: %s\n' "${SAY_PREFIX:-${0##*/}}" "$*" >&2; }
die() { say "FAILED: $*"; exit 1; }

stop_pid() {  # PID
    local pid=$1
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}

stop_nginx() {  # PID
    local pid=$1 workers w
    kill -0 "$pid" 2>/dev/null || return 0
    workers=$(pgrep -P "$pid" || true)
    stop_pid "$pid"
    for w in $workers; do stop_pid "$w"; done
    wait "$pid" 2>/dev/null || true
}

common_exit_variables=()
common_exit_steps=()
common_keep_variable=""

make_work() {  # NAME [KEEP_VARIABLE]
    work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    common_keep_variable=${2:-}
    trap common_exit EXIT
    trap 'exit 130' INT TERM
}

stop_at_exit() { common_exit_variables+=("$@"); }  # VARIABLE...

at_exit() { common_exit_steps+=("$1"); }  # COMMAND

common_exit() {
    # Local names of their own: a caller's variable named like one would be shadowed.
    local common_variable common_pid common_step common_pids
    for common_variable in "${common_exit_variables[@]}"; do
        eval "common_pids=(\"\${${common_variable}[@]}\")"
        for common_pid in "${common_pids[@]}"; do
            [[ -n "$common_pid" ]] || continue
            stop_pid "$common_pid"
            wait "$common_pid" 2>/dev/null || true
        done
    done
    for common_step in "${common_exit_steps[@]}"; do eval "$common_step"; done
    [[ -n "${work:-}" ]] || return 0
    if [[ -n "$common_keep_variable" && -n "${!common_keep_variable:-}" ]]; then say "kept $work"; else rm -rf "$work"; fi
}

start_nginx() {  # DIR URL
    local dir=$1 url=$2 binary
    binary=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)
    "$binary" -t -q -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log"
    "$binary" -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" -g 'daemon off;' > "$dir/logs/stdout.log" 2>&1 &
    nginx_pid=$!
    at_exit '[[ -z "${nginx_pid:-}" ]] || stop_nginx "$nginx_pid"'
    for _ in $(seq 1 100); do
        curl -sf -o /dev/null "$url" && break
        sleep 0.05
    done
    kill -0 "$nginx_pid" 2>/dev/null || { cat "$dir/logs/error.log" >&2; die "nginx did not start"; }
}

debug_bin_dir() {  # PRODUCT...
    local args=() product log
    if [[ -n "${TESTHUB_SCRATCH_PATH:-}" ]]; then args+=(--scratch-path "$TESTHUB_SCRATCH_PATH"); fi
    for product in "$@"; do
        log=$(cd "$common_repo_dir" && swift build "${args[@]}" --product "$product" 2>&1) \
            || { printf '%s\n' "$log" | grep -E "error: " >&2 || printf '%s\n' "$log" >&2; return 1; }
    done
    (cd "$common_repo_dir" && swift build "${args[@]}" --show-bin-path)
}

start_testhub() {  # BINARY OUT ERR ARG...
    local binary=$1 out=$2 err=$3
    shift 3
    "$binary" "$@" > "$out" 2> "$err" &
    testhub_pid=$!
    for _ in $(seq 1 300); do
        [[ -s "$out" ]] && break
        kill -0 "$testhub_pid" 2>/dev/null || { cat "$err" >&2; die "speech-testhub exited before serving"; }
        sleep 0.1
    done
    testhub_url=$(head -n 1 "$out")
    [[ "$testhub_url" == http://127.0.0.1:* ]] || { cat "$err" >&2; die "no base URL from speech-testhub"; }
}

release_binary() {  # PRODUCT
    local args=(-c release --static-swift-stdlib --product "$1")
    if [[ -n "${BENCH_SCRATCH_PATH:-}" ]]; then args+=(--scratch-path "$BENCH_SCRATCH_PATH"); fi
    (cd "$common_repo_dir" && swift build "${args[@]}" >&2) || return 1
    echo "$(cd "$common_repo_dir" && swift build "${args[@]}" --show-bin-path)/$1"
}

ensure_venv() {  # DIR CHECK REQUIREMENT...
    local dir=$1 check=$2; shift 2
    if [[ -x "$dir/bin/python" ]] && "$dir/bin/python" -c "$check" >/dev/null 2>&1; then return; fi
    echo "creating venv $dir ($*)" >&2
    if [[ ! -x "$dir/bin/python" ]]; then python3 -m venv "$dir" >&2 || return 1; fi
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2
}

read -r -a hf_client_lines <<< "${HF_CLIENT_LINES:-1.x latest}"

hf_client_python() {  # LINE
    local line=$1 requirement venv
    case "$line" in
        1.x) requirement='huggingface_hub<2' ;;
        latest) requirement='huggingface_hub' ;;
        *) echo "hf-clients: unknown huggingface_hub line '$line' (HF_CLIENT_LINES takes 1.x and latest)" >&2; return 64 ;;
    esac
    venv="${HUB_FIDELITY_VENV:-${TMPDIR:-/tmp}/speech-fetch-hub-fidelity-venv}-$line"
    if [[ ! -x "$venv/bin/python" ]]; then python3 -m venv "$venv" >&2 || return 1; fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "$requirement" >&2 || return 1
    echo "$venv/bin/python"
}
