#!/usr/bin/env bash
# Crash safety, measured (issue 24): `sesame token --force-refresh` killed with SIGKILL at random moments against
# `sesame serve` with refresh-token rotation, RUNS times; after each kill `sesame token --force-refresh` either works
# (the session survived) or fails (lost: counted for any non-zero exit; the expected one is 3, a refresh token the
# server had already rotated; a lost session is signed in again). Counts sessions lost and files corrupt, and the
# temporary files left once the last check ran. The first run builds `sesame` (debug) if needed.
#   Summary: "N runs (K killed before they finished)": the other N-K victims ended before the signal;
#   "temporary files left": a killed write that recovery did not adopt or delete (must be 0); "server: refreshes and
#   reuse detections": the server's counters (a reuse detection is a spent refresh token presented again).
# Without a grace the session is lost exactly when the kill lands after the server committed the rotation and before
# the new credentials' temporary file is complete on disk (fsync): the response in flight, decoded, being written.
# A kill after the fsync leaves a complete file that the next locked access adopts.
#   Scripts/kill-refresh.sh [RUNS] [GRACE_SECONDS]     defaults: 200 runs, no reuse grace (CI: 60 30)
#   KILL_REFRESH_VERBOSE=1 prints each lost run's messages.
# Exits 1 when a file was left corrupt, or when a session was lost although the server had a reuse grace (CI runs
# it that way); without a grace, losses are the measured window and only reported.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-200}
grace=${2:-0}
sesame=$root/.build/debug/sesame
source "$root/Scripts/kill-common.sh"
require_whole_numbers "$runs" "$grace"
build_sesame "$root"   # always the current code
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(free_port)
"$sesame" serve --port "$port" --password-iterations 1000 --refresh-reuse-grace "$grace" \
    --user alice@example.com:correct-horse >/dev/null 2>"$work/serve.log" &
server=$!
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/jwks" && break; sleep 0.1; done
export SESAME_HOME=$work/home SESAME_STORE=file
login() { echo correct-horse | "$sesame" login --rest "http://127.0.0.1:$port" --email alice@example.com 2>/dev/null; }
login
lost=0
corrupt=0
killed=0
for run in $(seq "$runs"); do
    "$sesame" token --force-refresh --verbose >/dev/null 2>"$work/victim-$run.log" &
    victim=$!
    # A random moment within the command's life (it takes 30-40 ms here, the refresh near its end).
    sleep "0.$(printf '%03d' $((RANDOM % 50)))"
    if kill -9 "$victim" 2>/dev/null; then killed=$((killed + 1)); fi
    wait "$victim" 2>/dev/null || true
    status=0
    # A refresh of its own, under the lock (so recovery runs): a spent refresh token shows here, at this run.
    "$sesame" token --force-refresh >/dev/null 2>"$work/err" || status=$?
    if ls "$SESAME_HOME/credentials" | grep -q corrupt; then
        corrupt=$((corrupt + 1))
        rm -f "$SESAME_HOME"/credentials/*corrupt*
    fi
    if [ "$status" -ne 0 ]; then
        lost=$((lost + 1))
        if [ -n "${KILL_REFRESH_VERBOSE:-}" ]; then
            echo "run $run: exit $status: $(cat "$work/err")"
            for log in "$work/victim-$((run - 1)).log" "$work/victim-$run.log"; do [ -f "$log" ] && { echo "== $log"; cat "$log"; }; done
        fi
        login
    fi
done
leftover=$(ls "$SESAME_HOME/credentials" | grep -c "tmp-" || true)
counters=$(curl -sf "http://127.0.0.1:$port/_dev/counters")
refreshes=$(python3 -c 'import json,sys; c=json.loads(sys.argv[1]); print(c["refreshes"], c["reuseDetections"])' "$counters")
echo "kill-refresh.sh: $runs runs ($killed killed before they finished), reuse grace ${grace}s: $lost sessions lost," \
    "$corrupt files corrupt, $leftover temporary files left; server: refreshes and reuse detections: $refreshes"
# A temporary file left after the last check means recovery did not run or did not finish: a failure with or
# without a grace (CI's grace would otherwise hide a recovery that no longer works).
if [ "$corrupt" -gt 0 ] || [ "$leftover" -gt 0 ] || { [ "$grace" -gt 0 ] && [ "$lost" -gt 0 ]; }; then exit 1; fi
