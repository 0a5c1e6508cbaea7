#!/usr/bin/env bash
# Fuzzes every parser that reads bytes from the network, a file or the command line, with libFuzzer (in the
# toolchain) and AddressSanitizer. A SwiftPM executable cannot link -sanitize=fuzzer (GROUND.md), so SwiftPM builds
# the package's modules with the instrumentation (testing enabled, release), and swiftc links Fuzz/*.swift against
# their objects. One binary holds every target; SESAME_FUZZ_TARGET picks one.
#
#   Scripts/fuzz.sh --list               the targets
#   Scripts/fuzz.sh TARGET [SECONDS [RUNS]]
#                                        runs one (default 60 s; with RUNS, stops at that many executions if that
#                                        comes first); a failing input goes to .build/fuzz/TARGET/ (crash-*,
#                                        timeout-* or oom-*, as libFuzzer names it)
#   Scripts/fuzz.sh all [SECONDS]        runs each target in turn for SECONDS (default 60; CI: 20)
#   Scripts/fuzz.sh --replay TARGET FILE runs one input once, as a run would (to reproduce, then to check a fix)
#   Scripts/fuzz.sh --build              builds only
#
# Linux only (libFuzzer ships with the Linux toolchain); needs what Scripts/install-deps.sh installs. The first run
# builds the package instrumented, in release, into .build/fuzz-spm (a few minutes).
# Each run prints a summary line: fuzz.sh: TARGET: N executions, cov C, ft F, 0 crashes
# Seeds are written below, taken from the tests' inputs (printf %b: a backslash in JSON is written \\); the jose
# target also reads ../shared/testvectors in place when present (new inputs go to .build/fuzz/TARGET/corpus).
# A new target: a case of FuzzTarget and a function in Fuzz/ (see Fuzz/SesameFuzz.swift), its name in `targets`
# below, and a `seed` line.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(jose discovery token-response device-response par-response error-response www-authenticate redirect
    dpop-proof http-request form stored-files cli-arguments)
usage() {
    echo "usage: Scripts/fuzz.sh --list | --build | TARGET [SECONDS [RUNS]] | all [SECONDS] | --replay TARGET FILE" >&2
    exit 2
}
known() { printf '%s\n' "${targets[@]}" | grep -qx -- "$1"; }
case "${1:-}" in
--list)
    printf '%s\n' "${targets[@]}"
    exit 0
    ;;
"" | -h | --help) usage ;;
--build | all) ;;
--replay) { known "${2:-}" && [[ -f "${3:-}" ]]; } || usage ;;
*) known "$1" || { echo "fuzz.sh: no target '$1' (Scripts/fuzz.sh --list)" >&2; exit 2; } ;;
esac
target="$1"
seconds="${2:-60}"
runs_limit="${3:--1}"
[[ "$target" == --replay || ("$seconds" =~ ^[0-9]+$ && "$runs_limit" =~ ^-?[0-9]+$) ]] || usage
out=.build/fuzz
scratch=.build/fuzz-spm
binary="$out/sesame-fuzz"

build() {
    mkdir -p "$out"
    # The build's own status decides; its log is shown when it failed or warned (gold's "Cannot export local symbol
    # '__asan_*'" warnings are the sanitizer runtime's own: noise).
    local build_log="$out/build.log"
    if ! swift build -c release --scratch-path "$scratch" --target sesame \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing > "$build_log" 2>&1; then
        grep -E "error" "$build_log" | head -n 20
        echo "fuzz.sh: the instrumented build failed (log: $build_log)"
        exit 1
    fi
    if grep -E "warning: " "$build_log" | grep -v "Cannot export local symbol '__asan"; then
        echo "fuzz.sh: the instrumented build has warnings (above)"
        exit 1
    fi
    local release="$scratch/release"
    mapfile -t objects < <(find "$release/" -maxdepth 2 -name '*.o' -path '*.build/*' \
        \( -path '*/Sesame.build/*' -o -path '*/SesameJOSE.build/*' -o -path '*/SesameLoopback.build/*' \
        -o -path '*/SesameDevServer.build/*' -o -path '*/SesameTesting.build/*' -o -path '*/sesame.build/*' \
        -o -path '*/CSesameCurl.build/*' -o -path '*/CSesameSecret.build/*' -o -path '*/CSesameEpoll.build/*' \))
    # The package name SwiftPM gave the modules (the clone's folder name), for `package` declarations.
    local package
    package=$(grep -o '"-package-name","[^"]*"' "$scratch/release.yaml" | head -1 | cut -d'"' -f4)
    local maps=()
    for map in "$release"/CSesame{Curl,Secret,Epoll}.build/module.modulemap Sources/CSesameOpenSSL/module.modulemap \
        Sources/CSQLite/module.modulemap; do
        maps+=(-Xcc "-fmodule-map-file=$map")
    done
    rm -f "$binary"
    swiftc -sanitize=fuzzer,address -parse-as-library -O -swift-version 6 -module-name SesameFuzz \
        -package-name "$package" -I "$release/Modules" "${maps[@]}" -I Sources/CSesameCurl/include \
        -I Sources/CSesameSecret/include -I Sources/CSesameEpoll/include \
        Fuzz/*.swift "${objects[@]}" -lcrypto -lsqlite3 -ldl -o "$binary" 2>&1 |
        grep -v "Cannot export local symbol '__asan" || true
    [[ -x "$binary" ]] || { echo "fuzz.sh: the harness did not link"; exit 1; }
}

seed() {
    local dir="$out/seeds/$1"
    shift
    rm -rf "$dir"
    mkdir -p "$dir"
    local n=0
    for value in "$@"; do
        n=$((n + 1))
        printf '%b' "$value" > "$dir/seed-$n"
    done
}

seeds() {
    local token='eyJhbGciOiJFUzI1NiIsImtpZCI6ImZ1enoifQ.eyJzdWIiOiJhIiwiZXhwIjoxfQ.AAAA'
    local discovery='{"issuer":"https://op.example","authorization_endpoint":"https://op.example/authorize","token_endpoint":"https://op.example/token","jwks_uri":"https://op.example/jwks","response_types_supported":["code"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"],"code_challenge_methods_supported":["S256"]}'
    seed jose "$token" '{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}' \
        '{"a":"\\u00e9\\ud83d\\ude00","b":[1,2.5e3,true,null]}' '{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}'
    # Responses: a status byte (0 = 200, 2 = 400, 3 = 401), header lines, a NUL, the body.
    seed discovery "\\x00Content-Type: application/json\\x00$discovery" "\\x00\\x00{\"issuer\":\"https://op.example\"}"
    seed token-response \
        '\x00Content-Type: application/json\nDate: Sun, 15 Jun 2025 15:06:40 GMT\x00{"access_token":"at","token_type":"Bearer","expires_in":300,"refresh_token":"rt","scope":"openid","id_token":"'"$token"'"}' \
        '\x00Date: Sunday, 15-Jun-25 15:06:40 GMT\x00{"access_token":"at","token_type":"Bearer"}' \
        '\x00Date: Sun Jun  1 15:06:40 2025\x00{"access_token":"at","token_type":"Bearer"}' \
        '\x02\x00{"error":"invalid_grant","error_description":"the refresh token was revoked"}' \
        '\x03WWW-Authenticate: DPoP error="use_dpop_nonce"\nDPoP-Nonce: n-1\x00{"error":"use_dpop_nonce"}'
    seed device-response \
        '\x00\x00{"device_code":"dc","user_code":"WDJB-MJHT","verification_uri":"https://op.example/device","verification_uri_complete":"https://op.example/device?user_code=WDJB-MJHT","expires_in":600,"interval":5}' \
        '\x02\x00{"error":"invalid_client"}'
    seed par-response '\x01\x00{"request_uri":"urn:ietf:params:oauth:request_uri:abc","expires_in":60}' \
        '\x02\x00{"error":"invalid_request"}'
    seed error-response '\x02\x00{"error":"invalid_grant","error_description":"expired","error_uri":"https://op.example/e"}' \
        '\x03WWW-Authenticate: Bearer error="insufficient_user_authentication", acr_values="mfa", max_age=300\x00' \
        '\x07Retry-After: Sun, 06 Nov 1994 08:49:37 GMT\x00' '\x07\x00<html>captive portal</html>' '\x02\x00{"error":"Bad Request"}'
    seed www-authenticate 'DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof", algs="ES256 EdDSA"' \
        'Bearer realm="example", error="insufficient_user_authentication", acr_values="urn:mace:incommon:iap:silver", max_age=300, Basic realm="x"' \
        'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"'
    seed redirect 'http://127.0.0.1:8765/callback?code=SplxlOBeZQQYbYS6WxSbIA&state=xyz&iss=https%3A%2F%2Fop.example' \
        'http://127.0.0.1:8765/callback?error=access_denied&error_description=no&state=xyz' \
        'com.example.app:/callback?code=a&code=b#frag' '/search?q=a b&x=50%&e=\xc3\xa9#f' '../v1/./me;x=1?y' \
        '/../\xcc\x81admin?\xcc\x81a=1'
    seed dpop-proof 'eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19.eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg'
    seed http-request 'GET /hello?name=a HTTP/1.1\r\nHost: x\r\n\r\n' \
        'POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 9\r\n\r\ncode=abcd' \
        'POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n4\r\nWiki\r\n0\r\n\r\n'
    seed form 'grant_type=authorization_code&code=SplxlOBeZQQYbYS6WxSbIA&redirect_uri=https%3A%2F%2Fclient%2Eexample%2Fcb' \
        'response_type=code&client_id=c&scope=openid+email&state=s&nonce=n&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&claims=%7B%22id_token%22%3A%7B%22acr%22%3A%7B%22essential%22%3Atrue%7D%7D%7D' \
        '%7B%22userinfo%22%3A%7B%22email%22%3Anull%7D%7D'
    seed stored-files '{"format":2,"accessToken":"at","tokenType":"Bearer","refreshToken":"rt","receivedAt":770000000}' \
        '{"version":1,"accounts":[{"issuer":"https://op.example","clientID":"c","subject":"s"}]}' \
        '{"sesame_format":2,"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA","d":"AAAA"}' \
        '{"format":2,"kind":"oidc","issuer":"https://op.example","clientID":"c","store":"file"}'
    seed cli-arguments 'login\x00--issuer\x00https://op.example\x00--client-id\x00c\x00--scope\x00openid' \
        'jwt\x00verify\x00--jwks\x00@keys.json\x00--\x00-' 'request\x00GET\x00/me\x00-H\x00Accept: x' 'logni\x00--helpp'
}

# The environment of every run: leaks off (LeakSanitizer takes Swift globals whose pointers sit in enum payloads for
# leaks; a real leak per input still fails a run, through the RSS limit), no Swift backtracer (its own reader trips
# ASan), the stored-files target's folder in $2. A run ($3 = fast) records no allocation stacks and keeps a smaller
# quarantine (a third to a half more executions; an overflow or use-after-free is still caught and the input kept);
# a replay keeps both, for a full report.
launch() {
    local name="$1" scratch_dir="$2" asan=detect_leaks=0
    [[ "$3" == fast ]] && asan+=:malloc_context_size=0:quarantine_size_mb=64
    shift 3
    SESAME_FUZZ_TARGET="$name" SESAME_FUZZ_SCRATCH="$scratch_dir" ASAN_OPTIONS="$asan" SWIFT_BACKTRACE=enable=no \
        "$binary" -timeout=5 -rss_limit_mb=1024 -detect_leaks=0 "$@"
}

run() {
    local name="$1" corpus="$out/$1/corpus"
    mkdir -p "$corpus" "$out/seeds/$name"
    local extra=()
    if [[ "$name" == jose && -d ../shared/testvectors ]]; then
        extra+=(../shared/testvectors)
    elif [[ "$name" == jose ]]; then
        echo "fuzz.sh: NOTICE: ../shared/testvectors is absent; the jose target starts from its own seeds only"
    fi
    local log="$out/$name/last.log"
    # The stored-files target writes its files in memory when it can, in a folder removed after the run (also
    # after a crash, which skips the harness's own clean-up).
    local base="${TMPDIR:-/tmp}"
    [[ -d /dev/shm && -w /dev/shm ]] && base=/dev/shm
    local scratch_dir
    scratch_dir=$(mktemp -d "$base/sesame-fuzz.XXXXXX")
    local status=0
    launch "$name" "$scratch_dir" fast -max_total_time="$seconds" -runs="$runs_limit" -max_len=4096 -print_final_stats=1 \
        -artifact_prefix="$out/$name/" "$corpus" "$out/seeds/$name" "${extra[@]}" > "$log" 2>&1 || status=$?
    rm -rf "$scratch_dir"
    local runs cov ft
    runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
    if [[ $status -ne 0 ]]; then
        tail -40 "$log"
        local unit
        unit=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | cut -d' ' -f5)
        echo "fuzz.sh: $name: FAILED after $runs executions: the input is ${unit:-(none written)}; the log is $log"
        echo "fuzz.sh: reproduce it with: Scripts/fuzz.sh --replay $name ${unit:-FILE}"
        return 1
    fi
    echo "fuzz.sh: $name: $runs executions, cov $cov, ft $ft, 0 crashes"
}

build
seeds
case "$target" in
--build) exit 0 ;;
--replay)
    scratch_dir=$(mktemp -d)
    status=0
    launch "$2" "$scratch_dir" full -runs=1 "$3" || status=$?
    rm -rf "$scratch_dir"
    exit $status
    ;;
all)
    failed=0
    for name in "${targets[@]}"; do run "$name" || failed=1; done
    exit $failed
    ;;
*) run "$target" ;;
esac
