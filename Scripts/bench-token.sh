#!/usr/bin/env bash
# How long `sesame token` takes (a signed-in profile, a valid token: the credential-plugin path kubectl and git
# run on every call) in each output (text, --output json, --output exec-credential, --min-validity), against a
# hello-world Swift executable that imports Foundation, both built -O in release, in the same run. Prints the
# medians and their ratios.
#
# Usage: Scripts/bench-token.sh [RUNS]   (default 51; each program runs RUNS times, interleaved)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-51}
case "$RUNS" in ''|*[!0-9]*) echo "bench-token.sh: RUNS must be a number" >&2; exit 2 ;; esac

swift build -c release --product sesame >/dev/null
BIN="$PWD/.build/release/sesame"
WORK=$(mktemp -d)
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# The reference: Foundation imported and used, nothing else.
printf 'import Foundation\nprint(ProcessInfo.processInfo.processIdentifier > 0 ? "hello" : "")\n' > "$WORK/hello.swift"
swiftc -O "$WORK/hello.swift" -o "$WORK/hello"

# A dev server and a profile with a token valid for an hour (file store: no keyring round trip).
mkfifo "$WORK/ready"
"$BIN" serve --port 0 --access-token-ttl 3600 --user bench@example.com:correct-horse-battery > "$WORK/ready" 2>/dev/null &
SERVER=$!
read -r URL < "$WORK/ready"
export SESAME_HOME="$WORK/home" SESAME_STORE=file
echo correct-horse-battery | "$BIN" login --rest "$URL" --email bench@example.com 2>"$WORK/login.log" \
    || { echo "bench-token.sh: the login failed:" >&2; cat "$WORK/login.log" >&2; exit 1; }

python3 - "$RUNS" "$BIN" "$WORK/hello" <<'PY'
import statistics, subprocess, sys, time
runs, sesame, hello = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def once(argv):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000
variants = [
    ("sesame token", [sesame, "token"]),
    ("sesame token --output json", [sesame, "token", "--output", "json"]),
    ("sesame token --output exec-credential", [sesame, "token", "--output", "exec-credential"]),
    ("sesame token --min-validity 600", [sesame, "token", "--min-validity", "600"]),
]
for _, argv in variants + [("hello", [hello])]:  # warm the page cache; a failing variant stops the run here
    once(argv)
times = {name: [] for name, _ in variants}
reference = []
for _ in range(runs):  # interleaved, so that a slower moment of the machine weighs on every program alike
    for name, argv in variants:
        times[name].append(once(argv))
    reference.append(once([hello]))
r = statistics.median(reference)
print(f"hello world importing Foundation (swiftc -O): median {r:.1f} ms over {runs} runs")
for name, _ in variants:
    t = statistics.median(times[name])
    print(f"{name + ' (release, valid token, file store):':<72} median {t:.1f} ms, {t / r:.2f}x")
PY
