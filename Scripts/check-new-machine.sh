#!/usr/bin/env bash
# The README's first command on a new machine: a fresh clone of HEAD is built (every product, warnings as errors)
# and `swift run sesame demo` runs, with libcurl's development files hidden (Scripts/hide-curl-dev.sh), as on a
# machine where nothing Scripts/install-deps.sh installs is there yet. (OpenSSL's and SQLite's headers and
# pkg-config are on such a machine; everything else the build needs is opened at run time.)
#
#   Scripts/check-new-machine.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clone=$(mktemp -d)
trap 'rm -rf "$clone"' EXIT
git clone --quiet --no-hardlinks "$root" "$clone/sesame"
cd "$clone/sesame"
git -C "$clone/sesame" log -1 --format='check-new-machine.sh: a fresh clone at %h'
# The toolchain may keep a module cache outside the clone: give the build its own, so nothing is borrowed.
export CLANG_MODULE_CACHE_PATH="$clone/module-cache"
bash "$root/Scripts/hide-curl-dev.sh" bash -c '
    set -euo pipefail
    swift build -Xswiftc -warnings-as-errors 2>&1 | grep -vE "^\[[0-9]+/[0-9]+\]" | tail -n 3
    swift run --skip-build sesame demo >demo.log 2>&1 || { cat demo.log; echo "check-new-machine.sh: the demo failed" >&2; exit 1; }
    tail -n 1 demo.log
'
echo "check-new-machine.sh: a fresh clone builds and runs the demo without libcurl's development files"
