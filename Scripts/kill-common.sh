# Shared by Scripts/kill-refresh.sh and Scripts/kill-serve.sh (sourced, not run): the argument check, the build of
# the current `sesame` and a free loopback port.

# Exits 2, with the calling script's header as usage, unless every argument is a whole number.
require_whole_numbers() {
    if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
        sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
        exit 0
    fi
    for value in "$@"; do
        [[ "$value" =~ ^[0-9]+$ ]] && continue
        sed -n '2,/^set /p' "$0" | grep '^#' >&2
        echo "$(basename "$0"): RUNS and GRACE_SECONDS are whole numbers" >&2
        exit 2
    done
}

# Builds the current code's `sesame` in $1 (a no-op when it is up to date); shows the log's end when it fails.
build_sesame() {
    local build_log
    build_log=$(mktemp)
    if ! (cd "$1" && swift build --product sesame > "$build_log" 2>&1); then
        tail -n 20 "$build_log" >&2
        rm -f "$build_log"
        exit 1
    fi
    rm -f "$build_log"
}

# A loopback port free right now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
