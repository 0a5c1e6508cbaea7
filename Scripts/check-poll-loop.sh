#!/usr/bin/env bash
# Runs the HTTP server's tests on its poll(2) path, the one Apple platforms take (Linux builds use epoll): a separate
# build with SESAME_FORCE_POLL defined, then the loopback suites and the CLI's flooded-listener test against it.
#
#   Scripts/check-poll-loop.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=.build/poll-loop
swift build --build-tests --scratch-path "$scratch" -Xswiftc -DSESAME_FORCE_POLL 2>&1 | grep -E "error|warning: " && exit 1
swift test --skip-build --scratch-path "$scratch" --filter "SesameLoopbackTests|floodedListener|InteropTests.browserSignIn" \
    2>&1 | tee "$scratch/test.log" | grep -E "Test run with|✘" || true
grep -q "✘" "$scratch/test.log" && { echo "check-poll-loop.sh: the poll path fails"; exit 1; }
grep -q "Test run with .* passed" "$scratch/test.log" || { echo "check-poll-loop.sh: no test ran"; exit 1; }
echo "check-poll-loop.sh: the loopback server's poll(2) path passes its tests"
