#!/usr/bin/env bash
# Runs the HTTP server's tests on its poll(2) path, the one Apple platforms take (Linux builds use epoll): a separate
# build with SESAME_FORCE_POLL defined, then the loopback suites and the CLI's flooded-listener test against it.
#
#   Scripts/check-poll-loop.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=.build/poll-loop
swift build --build-tests --scratch-path "$scratch" -Xswiftc -DSESAME_FORCE_POLL 2>&1 | grep -E "error|warning: " && exit 1
# One test at a time: several of these tests bound how fast a newcomer is served while a thousand connections
# misbehave, and on two cores the others' thousands of connections would be measured too (12 s in all).
SESAME_DESCRIPTOR_HEAVY=1 swift test --skip-build --no-parallel --scratch-path "$scratch" \
    --filter "SesameLoopbackTests|floodedListener|InteropTests.browserSignIn" 2>&1 | tee "$scratch/test.log" \
    | grep -E "Test run with|✘" || true
grep -q "✘" "$scratch/test.log" && { echo "check-poll-loop.sh: the poll path fails"; exit 1; }
if ! grep -q "Test run with .* passed" "$scratch/test.log"; then
    echo "check-poll-loop.sh: the test run did not finish; the end of its output ($scratch/test.log):"
    tail -n 40 "$scratch/test.log"
    exit 1
fi
echo "check-poll-loop.sh: the loopback server's poll(2) path passes its tests"
