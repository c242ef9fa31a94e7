# common.sh - the shell helpers more than one script of scripts/ needs; sourced, never run.
#
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
# The Python helpers' counterpart is scripts/lib/common.py.

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
