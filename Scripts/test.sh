#!/usr/bin/env bash
# The one test command (README, .ci/run): installs what the build and the tests need when it is missing
# (idempotent, quiet when everything is there), builds once with warnings as errors, and runs every test.
#
#   Scripts/test.sh                 everything (the two tests that hold 2,000 sockets after the rest, alone)
#   Scripts/test.sh --filter NAME   only tests whose name matches NAME (swift test --filter)
#
# Environment: SESAME_TESTVECTORS (default ../shared/testvectors) is where the Wycheproof files are read from;
# tests that need them are skipped, with a notice, when the folder is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

bash Scripts/install-deps.sh

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

# The interop peers (Chromium, Selenium, Authlib) were installed above: here their absence is a failure, not a skip.
SESAME_REQUIRE_INTEROP=1 swift test --skip-build "$@"
# The tests that hold 2,000 sockets under a time limit, alone, after the rest (Tests/SesameTestSupport/Sanitizers.swift).
# They must both run and pass: a filter that matches nothing (a renamed test) is a green run otherwise.
if [[ $# -eq 0 ]]; then
    SESAME_DESCRIPTOR_HEAVY=1 swift test --skip-build --filter "thousandTricklers|thousandIdle" 2>&1 | tee "$log"
    if ! grep -q "Test run with 2 tests .*passed" "$log" || grep -q "skipped" "$log"; then
        echo "test.sh: the two descriptor-heavy tests did not both run and pass" >&2
        exit 1
    fi
fi
