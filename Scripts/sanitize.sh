#!/usr/bin/env bash
# The suites that touch concurrency and C under a sanitizer (issue 24): ThreadSanitizer or AddressSanitizer.
#
#   Scripts/sanitize.sh thread|address [--filter REGEX]
#
# What runs: every suite of SesameTests (session, stores, the HTTP vocabulary), SesameIntegrationTests (the
# authorized client, sessions over the real transport, DPoP, OIDC, the libcurl transport, the JOSE backends through
# them), SesameDevServerTests (the dev server and its SQLite store), SesameLoopbackTests (the epoll server) and
# SesameJOSETests (the OpenSSL backend). Left out: SesameCLITests, which drive the `sesame` binary as subprocesses
# (the same SDK code, each process minutes slower when instrumented), and, through SESAME_SANITIZER, SlowClientTests
# (its point is a time bound under load). Under a sanitizer SessionRaceTests runs 50 rounds (not 200) and the
# 1,000-request DPoP test 250 requests.
# Fails on any sanitizer report, even one in a test that passed, and on any failed test.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() {
    echo "usage: Scripts/sanitize.sh thread|address [--filter REGEX]   (REGEX as swift test --filter takes it)" >&2
    exit 2
}
kind="${1:-}"
case "$kind" in
thread | address) ;;
-h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
    ;;
*) usage ;;
esac
shift
filter="SesameTests|SesameIntegrationTests|SesameDevServerTests|SesameLoopbackTests|SesameJOSETests"
while [[ $# -gt 0 ]]; do
    case "$1" in
    --filter) [[ $# -ge 2 ]] || usage; filter="$2"; shift 2 ;;
    --filter=*) filter="${1#--filter=}"; shift ;;
    *) usage ;;
    esac
done
scratch=.build/tsan
[[ "$kind" == address ]] && scratch=.build/asan
mkdir -p "$scratch"
build_log="$scratch/build.log"
if ! swift build --build-tests --sanitize="$kind" --scratch-path "$scratch" > "$build_log" 2>&1; then
    grep -E "error" "$build_log" | head -n 20
    echo "sanitize.sh: $kind: the build failed (log: $build_log)"
    exit 1
fi
log="$scratch/test.log"
status=0
# Leaks are not checked: LeakSanitizer takes Swift globals whose pointers sit in enum payloads for leaks.
SESAME_SANITIZER="$kind" TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1" ASAN_OPTIONS="detect_leaks=0" \
    SWIFT_BACKTRACE=enable=no swift test --skip-build --sanitize="$kind" --scratch-path "$scratch" \
    --filter "$filter" > "$log" 2>&1 || status=$?
grep -E "Test run with|✘" "$log" | tail -n 20 || true
reports=$(grep -cE "WARNING: ThreadSanitizer|ERROR: AddressSanitizer" "$log" || true)
if [[ "$reports" -gt 0 ]]; then
    grep -E -A30 "WARNING: ThreadSanitizer|ERROR: AddressSanitizer" "$log" | head -n 120
    echo "sanitize.sh: $kind: $reports report(s) (the whole log: $log)"
    exit 1
fi
count=$(grep -oE "Test run with [0-9]+ tests" "$log" | tail -1 | grep -oE "[0-9]+" || echo 0)
if [[ $status -ne 0 ]] || ! grep -q "Test run with .* passed" "$log" || [[ "$count" -eq 0 ]]; then
    echo "sanitize.sh: $kind: the tests failed or none ran (exit $status, $count tests; the whole log: $log)"
    exit 1
fi
echo "sanitize.sh: $kind: no report; $(grep -oE 'Test run with [0-9]+ tests' "$log" | tail -1) passed"
