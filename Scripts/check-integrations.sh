#!/usr/bin/env bash
# SesameAlamofire (Integrations/SesameAlamofire), in two parts:
#   1. type-checked (always): its sources compiled to SIL, warnings as failures, against Checks/Upstream/Alamofire.swift
#      — our own stand-in of the Alamofire 5.10 declarations the interceptor touches — and the main package's
#      modules. It proves the adapter compiles against those declarations, not that Alamofire calls it as documented.
#   2. run (with SESAME_ALAMOFIRE_PATH=DIR, a local Alamofire checkout): the package built against it and its tests
#      run against the dev server over loopback. This workspace keeps no copy of Alamofire, so CI prints "skipped".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$root/.build/integrations-check
mkdir -p "$work"

swift build --target Sesame -j 2 >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
swiftc -emit-module -parse-as-library -swift-version 6 -module-name Alamofire "$root/Checks/Upstream/Alamofire.swift" \
    -emit-module-path "$work/Alamofire.swiftmodule"
modules=(-I "$work" -I "$root/.build/debug/Modules"
    -Xcc "-fmodule-map-file=$root/Sources/CSesameOpenSSL/module.modulemap"
    -Xcc "-fmodule-map-file=$root/.build/debug/CSesameEpoll.build/module.modulemap"
    -Xcc "-fmodule-map-file=$root/.build/debug/CSesameCurl.build/module.modulemap"
    -Xcc "-fmodule-map-file=$root/.build/debug/CSesameSecret.build/module.modulemap")
mapfile -t sources < <(find "$root/Integrations/SesameAlamofire/Sources" -name '*.swift' | sort)
status=0
# SIL into a file of ours: swiftc renames its output over the path, so `-o /dev/null` would replace /dev/null.
out=$(swiftc -wmo -emit-sil -o "$work/SesameAlamofire.sil" -parse-as-library -swift-version 6 -module-name SesameAlamofire \
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault \
    -enable-upcoming-feature MemberImportVisibility "${modules[@]}" "${sources[@]}" 2>&1) || status=$?
rm -f "$work/SesameAlamofire.sil"
[ -c /dev/null ] || { echo "check-integrations.sh: /dev/null is no longer a device" >&2; exit 1; }
if [ "$status" -ne 0 ] || grep -qE "(error|warning):" <<<"$out"; then
    grep -E "(error|warning):" <<<"$out" | grep -v "^ " | head -40
    echo "check-integrations.sh: SesameAlamofire does not type-check against the Alamofire stand-in (above)" >&2
    exit 1
fi
echo "check-integrations.sh: type-checked SesameAlamofire against the Alamofire 5.10 stand-in (Checks/Upstream)"

if [ -z "${SESAME_ALAMOFIRE_PATH:-}" ]; then
    echo "check-integrations.sh: skipped: SesameAlamofire's tests need Alamofire itself: SESAME_ALAMOFIRE_PATH=DIR,"
    echo "  DIR a checkout of Alamofire 5.10 or later (its Package.swift at the top); only the type-check above ran"
    exit 0
fi
[ -f "$SESAME_ALAMOFIRE_PATH/Package.swift" ] || { echo "no Package.swift in $SESAME_ALAMOFIRE_PATH" >&2; exit 1; }
cd Integrations/SesameAlamofire
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build --build-tests 2>&1 | tee "$log" | grep -vE '^\[[0-9]+/[0-9]+\]' | grep -E "error|Integrations/.*warning" || true
if grep -E '^/.*/Integrations/.*: (warning|error):' "$log"; then
    echo "check-integrations.sh: the integration package has warnings or errors (above)" >&2
    exit 1
fi
swift test --skip-build
