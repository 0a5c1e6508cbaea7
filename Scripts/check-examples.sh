#!/usr/bin/env bash
# The sample apps (Examples/): their package builds and its tests pass against the dev server; the Linux CLI example
# runs end to end as a user would run it (a device code approved at the dev server's page). The iOS app's SwiftUI
# views and model are Scripts/check-apple.sh's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

swift build --package-path Examples -j 2 --build-tests 2>&1 | grep -E "error|warning:|Compiling|Build complete" | grep -vE "Compiling" || true
swift build --package-path Examples -j 2 --build-tests >/dev/null
swift test --package-path Examples --skip-build 2>&1 | grep -E "✘|Test run with"
swift test --package-path Examples --skip-build >/dev/null

# The CLI example, run as written in Examples/README.md, against `sesame serve`.
swift build --product sesame -j 2 >/dev/null
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
.build/debug/sesame serve --port "$port" --user alice@example.com:correct-horse --password-iterations 1000 \
    >/dev/null 2>"$work/serve.log" &
server=$!
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/jwks" && break; sleep 0.2; done
cli=$(swift build --package-path Examples --show-bin-path)/example-cli
export EXAMPLE_CLI_HOME="$work/home"
"$cli" login "http://127.0.0.1:$port" >"$work/login.out" 2>&1 &
login=$!
for _ in $(seq 50); do grep -q "enter" "$work/login.out" && break; sleep 0.2; done
code=$(sed -n 's/.* and enter \(.*\)$/\1/p' "$work/login.out")
python3 "$root/Tests/Interop/approve_device.py" "http://127.0.0.1:$port" "$code" alice@example.com correct-horse
wait "$login"
grep -q "signed in as alice@example.com" "$work/login.out"
"$cli" whoami | grep -q "alice@example.com (HTTP 200)"
"$cli" logout | grep -q "signed out"
if "$cli" whoami 2>/dev/null; then echo "check-examples.sh: still signed in after logout" >&2; exit 1; fi
echo "check-examples.sh: the Linux CLI example signed in with a device code, called the API and signed out"

# The iOS app's model and views are compiled for iOS against the SwiftUI and Apple stand-ins by Scripts/check-apple.sh
# (only Xcode can build and run them: see Examples/README.md).
