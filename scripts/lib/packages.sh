# packages.sh - the Debian packages of scripts/lib/packages (the one list), for the scripts that
# install or name them; sourced, never run.
#
#   packages_missing KIND...  the packages of those kinds (build, test, runtime) that are not
#                             installed here, one a line
#   packages_install PKG...   apt-get install, as root or through sudo; apt-get update first only
#                             when the install fails (an old package index); apt-get's options
#                             (--no-install-recommends) may stand among the packages
#   packages_runtime          "package soname" of each runtime row: the libraries the binaries
#                             open at first use
#   apt_install PKG...        says so on stderr and installs them (--no-install-recommends);
#                             nothing when none is named: the harnesses' "install what is missing"

packages_file="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/packages"

packages_rows() {  # the list without comments and blank lines: package kind check module
    awk '!/^[[:space:]]*(#|$)/ { print $1, $2, $3, $4 }' "$packages_file"
}

package_present() {  # CHECK[,CHECK...]: true when every check holds
    local check checks
    IFS=, read -r -a checks <<< "$1"
    for check in "${checks[@]}"; do
        case "$check" in
            pkg-config:*) pkg-config --exists "${check#pkg-config:}" 2>/dev/null || return 1 ;;
            file:*) [ -e "${check#file:}" ] || return 1 ;;
            command:*) command -v "${check#command:}" >/dev/null || return 1 ;;
            # awk reads ldconfig's answer to the end: an early exit would leave it a closed pipe.
            soname:*) ldconfig -p | awk -v n="${check#soname:}" '$1 == n { found = 1 } END { exit !found }' || return 1 ;;
            *) echo "packages.sh: unknown check '$check' in $packages_file" >&2; return 1 ;;
        esac
    done
}

packages_missing() {  # KIND...
    local package kind check module want
    while read -r package kind check module; do
        for want in "$@"; do
            if [ "$kind" = "$want" ] && ! package_present "$check"; then echo "$package"; fi
        done
    done < <(packages_rows)
}

packages_install() {  # PACKAGE...
    [ $# -gt 0 ] || return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
        || { $sudo apt-get update -qq >/dev/null && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
}

packages_runtime() {
    local package kind check module
    while read -r package kind check module; do
        if [ "$kind" = runtime ]; then echo "$package ${check#soname:}"; fi
    done < <(packages_rows)
}

apt_install() {  # PACKAGE...
    (($#)) || return 0
    echo "installing $* (apt-get)" >&2
    packages_install --no-install-recommends "$@"
}
