#!/usr/bin/env bash
# Crash safety of the dev server, measured (issue 24): `sesame serve --db FILE` killed with SIGKILL at random moments
# while `sesame token --force-refresh` rotates the refresh token, RUNS times. After each kill the server restarts on
# the same file and must still have the user (a password sign-in works), the grant (the client's retry refreshes)
# and the signing key (the JWKS still holds the first run's key); SQLite's integrity check must pass.
#   Scripts/kill-serve.sh [RUNS] [GRACE_SECONDS]    defaults: 200 runs (CI: 50), a 30 s refresh reuse grace, so that a
#                                                   rotation that committed but whose answer died with the server is
#                                                   presented again and taken
# Exits 1 on a lost user or key, a damaged database, or (with a grace) a lost grant; without a grace, grants lost
# are the measured window (the client presents a token whose rotation committed) and only reported.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-200}
grace=${2:-30}
sesame=$root/.build/debug/sesame
source "$root/Scripts/kill-common.sh"
require_whole_numbers "$runs" "$grace"
build_sesame "$root"   # always the current code
work=$(mktemp -d)
server=
# (The server's "Killed" status must not become the script's: under set -e a failing last command of the trap would.)
trap '{ [ -n "$server" ] && kill -9 $server && wait $server; } 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(free_port)
base="http://127.0.0.1:$port"
start() {
    "$sesame" serve --port "$port" --db "$work/dev.db" --password-iterations 1000 --refresh-reuse-grace "$grace" \
        --access-token-ttl 60 --user alice@example.com:correct-horse >/dev/null 2>>"$work/serve.log" &
    server=$!
    for _ in $(seq 100); do curl -sf -o /dev/null "$base/jwks" && return 0; sleep 0.05; done
    echo "kill-serve.sh: the server did not come back"; cat "$work/serve.log"; exit 1
}
kids() { curl -sf "$base/jwks" | python3 -c 'import json,sys; print(" ".join(k["kid"] for k in json.load(sys.stdin)["keys"]))'; }
start
export SESAME_HOME=$work/home SESAME_STORE=file
echo correct-horse | "$sesame" login --rest "$base" --email alice@example.com >/dev/null 2>&1
first_kid=$(kids | cut -d' ' -f1)
killed_mid=0 lost_grant=0 lost_user=0 lost_key=0 damaged=0 refreshes=0
for run in $(seq "$runs"); do
    "$sesame" token --force-refresh >/dev/null 2>&1 &
    victim=$!
    sleep "0.$(printf '%03d' $((RANDOM % 60)))"
    kill -9 "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
    status=0
    wait "$victim" 2>/dev/null || status=$?
    [ "$status" -ne 0 ] && killed_mid=$((killed_mid + 1))
    check=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("pragma integrity_check").fetchone()[0])' "$work/dev.db")
    [ "$check" = ok ] || { damaged=$((damaged + 1)); echo "run $run: integrity_check: $check"; }
    start
    # The grant: the client's retry (the token it kept, spent or not) refreshes.
    if "$sesame" token --force-refresh >/dev/null 2>"$work/err"; then
        refreshes=$((refreshes + 1))
    else
        lost_grant=$((lost_grant + 1))
        echo "run $run: the retry failed: $(cat "$work/err")"
        echo correct-horse | "$sesame" login --rest "$base" --email alice@example.com >/dev/null 2>&1 || true
    fi
    # The user, and the signing key.
    curl -sf -o /dev/null -H 'Content-Type: application/json' -d '{"email":"alice@example.com","password":"correct-horse"}' \
        "$base/login" || { lost_user=$((lost_user + 1)); echo "run $run: alice cannot sign in"; }
    case " $(kids) " in *" $first_kid "*) ;; *) lost_key=$((lost_key + 1)); echo "run $run: the signing key changed" ;; esac
done
echo "kill-serve.sh: $runs SIGKILLs of sesame serve, reuse grace ${grace}s ($killed_mid mid-refresh: the client saw the server die);" \
    "after restart: $refreshes retries refreshed, $lost_grant grants lost, $lost_user users lost," \
    "$lost_key signing keys lost, $damaged databases damaged"
[ "$grace" -eq 0 ] && lost_grant=0
[ $((lost_grant + lost_user + lost_key + damaged)) -eq 0 ]
