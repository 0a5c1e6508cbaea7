#!/usr/bin/env bash
# Runs a command as on a new machine of the kind we build on, where libcurl's development files are not installed:
# in a private mount namespace, libcurl's headers, its pkg-config file and its development symlink (libcurl.so) are
# hidden behind overlays held in memory; the run-time library (libcurl.so.4) stays. Nothing outside the command
# sees a change, and nothing is written to disk.
#
#   Scripts/hide-curl-dev.sh swift build
#
# Needs root (or a user namespace) and overlayfs; where they are missing it says so and exits 1.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: Scripts/hide-curl-dev.sh COMMAND [ARGUMENT...]" >&2; exit 2; }

if [ "${SESAME_CURL_DEV_HIDDEN:-}" != "1" ]; then
    command -v unshare >/dev/null 2>&1 || { echo "hide-curl-dev.sh: unshare (util-linux) is missing" >&2; exit 1; }
    scratch=$(mktemp -d)
    trap 'rmdir "$scratch" 2>/dev/null || true' EXIT
    status=0
    SESAME_CURL_DEV_HIDDEN=1 SESAME_HIDE_SCRATCH="$scratch" unshare --mount --propagation private \
        bash "$0" "$@" || status=$?
    exit "$status"
fi

# Inside the namespace: an overlay over each folder that holds a development file, with the file removed above it.
scratch=$SESAME_HIDE_SCRATCH
mount -t tmpfs -o size=16m,mode=0700 sesame-hide "$scratch"
hide() {  # folder, then the names inside it to hide
    local folder=$1 n
    shift
    [ -d "$folder" ] || return 0
    n=$(mktemp -d -p "$scratch")
    mkdir "$n/upper" "$n/work"
    mount -t overlay sesame-hide -o "lowerdir=$folder,upperdir=$n/upper,workdir=$n/work" "$folder"
    for name in "$@"; do rm -rf "${folder:?}/$name"; done
}
multiarch=$(gcc -print-multiarch 2>/dev/null || echo "$(uname -m)-linux-gnu")
hide /usr/include curl
hide "/usr/include/$multiarch" curl
hide "/usr/lib/$multiarch" libcurl.so libcurl.a libcurl.la
hide "/usr/lib/$multiarch/pkgconfig" libcurl.pc
hide /usr/lib/pkgconfig libcurl.pc
hide /usr/share/pkgconfig libcurl.pc

# Refuse to run unless the hiding worked, so a pass here means something.
for header in /usr/include/curl/curl.h "/usr/include/$multiarch/curl/curl.h"; do
    [ ! -e "$header" ] || { echo "hide-curl-dev.sh: $header is still visible" >&2; exit 1; }
done
[ ! -e "/usr/lib/$multiarch/libcurl.so" ] || { echo "hide-curl-dev.sh: libcurl.so is still visible" >&2; exit 1; }
if pkg-config --exists libcurl 2>/dev/null; then echo "hide-curl-dev.sh: pkg-config still finds libcurl" >&2; exit 1; fi
echo "hide-curl-dev.sh: libcurl's headers, pkg-config file and libcurl.so hidden; running: $1" >&2
exec "$@"
