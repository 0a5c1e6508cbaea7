#!/usr/bin/env bash
# The one test command (README, .ci/run): installs what the build and the tests need when it is missing
# (idempotent, quiet when everything is there), builds once with warnings as errors, and runs every test.
#
#   Scripts/test.sh                 everything
#   Scripts/test.sh --filter NAME   only tests whose name matches NAME (swift test --filter)
#
# Environment: SESAME_TESTVECTORS (default ../shared/testvectors) is where the Wycheproof files are read from;
# tests that need them are skipped, with a notice, when the folder is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev)
pkg-config --exists sqlite3 2>/dev/null || missing+=(libsqlite3-dev)  # the dev server's store
command -v python3 >/dev/null 2>&1 || missing+=(python3)  # the CLI tests' one-shot HTTP server
# The real Linux keyring for the Secret Service store's test (a private D-Bus session runs it).
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus)
command -v gnome-keyring-daemon >/dev/null 2>&1 || missing+=(gnome-keyring)
[ -e /usr/lib/x86_64-linux-gnu/libsecret-1.so.0 ] || [ -e /usr/lib/aarch64-linux-gnu/libsecret-1.so.0 ] \
    || missing+=(libsecret-1-0)
if [ ${#missing[@]} -gt 0 ]; then
    echo "test.sh: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Library and executables: Swift 6 mode, no warnings, explicit Sendable on every public type (STYLE.md §4).
swift build -Xswiftc -warnings-as-errors -Xswiftc -require-explicit-sendable

# Tests: Swift Testing's macros trip -warnings-as-errors in this toolchain, so fail on our own warnings instead.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build --build-tests 2>&1 | tee "$log" | grep -vE '^\[[0-9]+/[0-9]+\]' || true
if grep -E '^/.*/(Sources|Tests|Benchmarks)/.*: warning:' "$log"; then
    echo "test.sh: the build has warnings (above)" >&2
    exit 1
fi
grep -q "error:" "$log" && { echo "test.sh: the build failed" >&2; exit 1; }

swift test --skip-build "$@"
