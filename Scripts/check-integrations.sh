#!/usr/bin/env bash
# Builds SesameAlamofire (Integrations/SesameAlamofire) against the vendored Alamofire in ../shared/vendor and
# runs its tests against the dev server over loopback, printing the Swift Testing summary. Skips with a notice
# where the vendored copy is absent (a user's clone): the package then resolves Alamofire from GitHub instead.
set -euo pipefail
cd "$(dirname "$0")/.."
vendor="${SESAME_VENDOR:-$(cd .. && pwd)/shared/vendor}"
if [ ! -f "$vendor/Alamofire/Package.swift" ]; then
    echo "check-integrations.sh: NOTICE: no vendored Alamofire at $vendor/Alamofire; the integration tests are skipped."
    exit 0
fi
export SESAME_ALAMOFIRE_PATH="$vendor/Alamofire"
cd Integrations/SesameAlamofire
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build --build-tests 2>&1 | tee "$log" | grep -vE '^\[[0-9]+/[0-9]+\]' | grep -E "error|Integrations/.*warning" || true
if grep -E '^/.*/Integrations/.*: (warning|error):' "$log"; then
    echo "check-integrations.sh: the integration package has warnings or errors (above)" >&2
    exit 1
fi
swift test --skip-build
