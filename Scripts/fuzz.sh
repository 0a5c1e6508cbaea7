#!/usr/bin/env bash
# Fuzzes every parser that reads bytes from the network, a file or the command line, with libFuzzer (in the
# toolchain) and AddressSanitizer. A SwiftPM executable cannot link -sanitize=fuzzer (the team's ../shared/GROUND.md),
# so SwiftPM builds the package's modules with the instrumentation (testing enabled, release), and swiftc links
# Fuzz/*.swift against their objects. One binary holds every target; SESAME_FUZZ_TARGET picks one.
#
#   Scripts/fuzz.sh --list               the targets, each with what it calls
#   Scripts/fuzz.sh TARGET [SECONDS [RUNS]]
#                                        runs one (default 60 s; 0 s: no time limit; with RUNS, stops at that many
#                                        executions if that comes first); a failing input goes to .build/fuzz/TARGET/
#                                        (crash-*, timeout-* or oom-*, as libFuzzer names it)
#   Scripts/fuzz.sh all [SECONDS]        runs each target in turn for SECONDS (default 60; CI: 20)
#   Scripts/fuzz.sh --replay TARGET FILE runs one input once, as a run would (to reproduce, then to check a fix);
#                                        FILE relative to where you are; the report is printed, a failing
#                                        input also kept as .build/fuzz/TARGET/replay-*
#                                        (SESAME_FUZZ_TRACE=1 makes targets say what the input reached)
#   Scripts/fuzz.sh --build              builds only
#
# Linux only (libFuzzer ships with the Linux toolchain); needs what Scripts/install-deps.sh installs. The first run
# builds the package instrumented, in release, into .build/fuzz-spm (a few minutes); later ones relink the harness
# (seconds). Runs of different targets may go on at once (a new link replaces the binary by rename; a running one
# keeps its copy); two runs of the same target share its corpus and log, so do not.
# Each run prints a summary line: fuzz.sh: TARGET: N executions (E/s), cov C, ft F, corpus K inputs, 0 crashes
# (log: .build/fuzz/TARGET/last.log), and appends a line to .build/fuzz/TARGET/runs.tsv: the time (UTC), the commit
# (+changes when Sources/ or Fuzz/ differ from it), the harness (the first 12 hex digits of the SHA-256 of
# Fuzz/*.swift: another harness is another campaign), executions, coverage, features, crashes (0 or 1).
#   Scripts/fuzz.sh --campaign           each target's runs on the current harness: executions summed, crashes
# The corpus: .build/fuzz/TARGET/corpus, kept between runs (a run starts from it and the seeds, and adds what found
# new coverage), gone with .build; CI's clean clone starts from the seeds. A campaign is runs one after another:
# Scripts/fuzz.sh TARGET 0 10000000 runs to 10 million executions (those include re-reading the corpus at start).
# Seeds are written below, taken from the tests' inputs; the jose target also reads ../shared/testvectors in place
# when present. A seed is one argument of its target's `seed` call, in printf %b form (\xNN for a byte that is not
# printable ASCII, \\ for a backslash): add an input as one more argument of that call (a second `seed` call for
# the same target would replace the first's). `python3 -c 'import sys; print("".join(chr(b) if 32 <= b < 127 and
# b not in (39, 92) else "\\x%02x" % b for b in open(sys.argv[1], "rb").read()))' FILE` prints a file in that form,
# to put in single quotes as the seeds are.
# A new target: see the comment at the top of Fuzz/SesameFuzz.swift (its raw value is the name in `targets` below).
set -euo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.."
targets=(jose discovery token-response device-response par-response error-response www-authenticate redirect
    dpop-proof http-request form stored-files cli-arguments provider-response resource-response credential-helper
    dev-server)
usage() {
    echo "usage: Scripts/fuzz.sh --list | --build | --campaign | TARGET [SECONDS [RUNS]] | all [SECONDS] | --replay TARGET FILE" >&2
    exit 2
}
# A loop, not `printf | grep -q`: grep leaving at the first match can kill printf with SIGPIPE, which pipefail then
# reports as "no such target" (it did).
known() {
    local target
    for target in "${targets[@]}"; do [[ "$target" == "$1" ]] && return 0; done
    return 1
}
describe() {
    case "$1" in
    jose) echo "JOSEValue.parse, JWK, JWKSet, JWT.unverified, Base64URL, JWTVerifier.verify (nothing fuzzed verifies; a JSON object is also signed as claims, and what verifies meets the policy)" ;;
    discovery) echo "OIDCProviderMetadata from a discovery response (the issuer found is the one asked for)" ;;
    token-response) echo "a refresh and a code exchange answered with it (first byte's top bit: DPoP on, the next: a step-up request; an id_token written as a JSON object is signed; the right type, binding, issuer, audience, subject, nonce, auth_time, acr)" ;;
    device-response) echo "a device authorization answered with it (the URIs shown are https or loopback)" ;;
    par-response) echo "a pushed authorization request answered with it (the URL stays at the provider)" ;;
    error-response) echo "ServerErrorResponse, the definitive-rejection rule, StepUpChallenge, Retry-After" ;;
    www-authenticate) echo "AuthenticationChallenge.parse and StepUpChallenge of a WWW-Authenticate value" ;;
    redirect) echo "SesameHTTP.url(path:under:) (stays under /v1); AuthorizationResponse and completeAuthorization (STATE stands for the request's state; only a valid response reaches the token endpoint)" ;;
    dpop-proof) echo "DPoPProofVerifier (nothing fuzzed verifies; a JSON object is also signed as a proof's claims, ATH for the hash of 'at', and what verifies says what RFC 9449 requires)" ;;
    http-request) echo "the loopback server's HTTPRequestParser (head, length, Expect)" ;;
    form) echo "HTTPFormEncoding (round trip), OAuthParameters, ClaimsRequest" ;;
    stored-files) echo "the file token store (never loses a file's bytes), account index, DPoP key file, CLI settings" ;;
    cli-arguments) echo "the CLI's command table, argument parser, profile options and suggestions" ;;
    resource-response) echo "AuthorizedClient's redirects, 401/403 challenges and errors under each redirect policy, Bearer or DPoP (credentials only to the base's origin; one refresh per request)" ;;
    dev-server) echo "the dev server's handlers (every route but /_dev/), fed what the loopback HTTP parser hands over" ;;
    credential-helper) echo "what git sends sesame credential-helper: attributes, the origin they name, whether it may have a token (only the client's own)" ;;
    provider-response) echo "UserInfo (its sub is the ID token's), revocation, the REST contract's login, refresh, /me, logout" ;;
    esac
}
case "${1:-}" in
--list)
    for name in "${targets[@]}"; do printf '%-17s %s\n' "$name" "$(describe "$name")"; done
    exit 0
    ;;
-h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
    ;;
--campaign)
    harness=$(cat Fuzz/*.swift | sha256sum | cut -c1-12)
    echo "fuzz.sh: the campaign on harness $harness (.build/fuzz/TARGET/runs.tsv; other harnesses' runs not counted)"
    for name in "${targets[@]}"; do
        file=.build/fuzz/$name/runs.tsv
        [[ -f "$file" ]] || { printf '%-17s no recorded run\n' "$name"; continue; }
        awk -F'\t' -v h="$harness" -v n="$name" '$3 == h { e += $4; r++; c += $7; if ($1 > last) last = $1 }
            END { printf "%-17s %d executions in %d runs, %d crashes%s\n", n, e, r, c, (r ? ", last " last : "") }' "$file"
    done
    exit 0
    ;;
"") usage ;;
--build | all) ;;
--replay)
    known "${2:-}" || usage
    replay_file="${3:-}"
    [[ "$replay_file" == /* ]] || replay_file="$caller_dir/$replay_file"
    [[ -f "$replay_file" ]] || { echo "fuzz.sh: no file '${3:-}'" >&2; exit 2; }
    ;;
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
    # Linked beside the binary, then renamed over it: a run of another target keeps the file it started with.
    local linked="$binary.link-$$"
    rm -f "$linked"
    swiftc -sanitize=fuzzer,address -parse-as-library -O -swift-version 6 -module-name SesameFuzz \
        -package-name "$package" -I "$release/Modules" "${maps[@]}" -I Sources/CSesameCurl/include \
        -I Sources/CSesameSecret/include -I Sources/CSesameEpoll/include \
        Fuzz/*.swift "${objects[@]}" -lcrypto -lsqlite3 -ldl -o "$linked" 2>&1 |
        grep -v "Cannot export local symbol '__asan" || true
    [[ -x "$linked" ]] || { echo "fuzz.sh: the harness did not link"; exit 1; }
    mv -f "$linked" "$binary"
}

# Writes one target's seeds, only those of the targets this call runs: a run of another target, starting meanwhile,
# never finds its seed folder half rewritten.
seed() {
    [[ "$target" == all || "$target" == "$1" ]] || return 0
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
        '{"a":"\\u00e9\\ud83d\\ude00","b":[1,2.5e3,true,null]}' '{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}' \
        '{"iss":"https://op.example","sub":"a","aud":["fuzz-client","other"],"azp":"fuzz-client","nonce":"n","exp":1750000100,"nbf":1749999990,"iat":1750000000,"auth_time":1749999000}'
    # Responses: a status byte (an index, modulo 10, into FuzzResponse.statuses: 0 = 200, 1 = 201, 2 = 400, 3 = 401,
    # 4 = 403, 5 = 404, 6 = 429, 7 = 500, 8 = 503, 9 = 302), header lines, a NUL, the body.
    seed discovery "\\x00Content-Type: application/json\\x00$discovery" "\\x00\\x00{\"issuer\":\"https://op.example\"}"
    seed token-response \
        '\x00Content-Type: application/json\nDate: Sun, 15 Jun 2025 15:06:40 GMT\x00{"access_token":"at","token_type":"Bearer","expires_in":300,"refresh_token":"rt","scope":"openid","id_token":"'"$token"'"}' \
        '\x00Date: Sunday, 15-Jun-25 15:06:40 GMT\x00{"access_token":"at","token_type":"Bearer"}' \
        '\x00Date: Sun Jun  1 15:06:40 2025\x00{"access_token":"at","token_type":"Bearer"}' \
        '\x02\x00{"error":"invalid_grant","error_description":"the refresh token was revoked"}' \
        '\x03WWW-Authenticate: DPoP error="use_dpop_nonce"\nDPoP-Nonce: n-1\x00{"error":"use_dpop_nonce"}' \
        '\x00\x00{"access_token":"at","token_type":"Bearer","id_token":{"iss":"https://op.example","sub":"user-1","aud":"fuzz-client","exp":1750003600,"iat":1750000000,"nonce":"NONCE","auth_time":1749999000}}' \
        '\xa0\x00{"access_token":"at","token_type":"DPoP","expires_in":60,"refresh_token":"rt2","id_token":{"iss":"https://op.example","sub":"user-1","aud":["fuzz-client"],"azp":"fuzz-client","exp":1750003600,"iat":1750000000,"nonce":"NONCE"}}' \
        '\x84DPoP-Nonce: n-1\x00{"error":"use_dpop_nonce","error_description":"nonce required"}' \
        '\x46\x00{"access_token":"at","token_type":"Bearer","id_token":{"iss":"https://op.example","sub":"user-1","aud":"fuzz-client","exp":1750003600,"iat":1750000000,"nonce":"NONCE","auth_time":1749999500,"acr":"mfa"}}' \
        '\x00Date: Sun, 15\xe0\xb5\x8a\xff 202550 :16:40 GMT\x00{"access_token":"at","token_type":"Bearer"}'
    seed device-response \
        '\x00\x00{"device_code":"dc","user_code":"WDJB-MJHT","verification_uri":"https://op.example/device","verification_uri_complete":"https://op.example/device?user_code=WDJB-MJHT","expires_in":600,"interval":5}' \
        '\x02\x00{"error":"invalid_client"}'
    seed par-response '\x01\x00{"request_uri":"urn:ietf:params:oauth:request_uri:abc","expires_in":60}' \
        '\x02\x00{"error":"invalid_request"}'
    seed error-response '\x02\x00{"error":"invalid_grant","error_description":"expired","error_uri":"https://op.example/e"}' \
        '\x03WWW-Authenticate: Bearer error="insufficient_user_authentication", acr_values="mfa", max_age=300\x00' \
        '\x06Retry-After: Sun, 06 Nov 1994 08:49:37 GMT\x00' '\x00\x00<html>captive portal</html>' '\x02\x00{"error":"Bad Request"}'
    seed www-authenticate 'DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof", algs="ES256 EdDSA"' \
        'Bearer realm="example", error="insufficient_user_authentication", acr_values="urn:mace:incommon:iap:silver", max_age=300, Basic realm="x"' \
        'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"'
    seed redirect 'http://127.0.0.1:8765/callback?code=SplxlOBeZQQYbYS6WxSbIA&state=xyz&iss=https%3A%2F%2Fop.example' \
        'http://127.0.0.1:8765/callback?error=access_denied&error_description=no&state=xyz' \
        'com.example.app:/callback?code=a&code=b#frag' '/search?q=a b&x=50%&e=\xc3\xa9#f' '../v1/./me;x=1?y' \
        '/../\xcc\x81admin?\xcc\x81a=1' 'http://127.0.0.1:8765/callback?code=x&state=STATE&iss=https%3A%2F%2Fop.example' \
        'http://127.0.0.1:8765/callback?error=access_denied&state=STATE' 'HTTP://127.0.0.1:08765/callback?state=STATE&code=y' \
        'http://127.0.0.1:8765/callback?code=c&state=STATE&%EF%BB%BFstate=x'
    seed dpop-proof 'eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19.eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg' \
        '{"jti":"-BwC3ESc6acc2lTc","htm":"POST","htu":"https://op.example/token","iat":1750000000}' \
        '{"jti":"e1j3V_bKic8-LAEB","htm":"GET","htu":"https://op.example/token?x#y","iat":1749999950,"ath":"ATH","nonce":"n"}'
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
    seed provider-response '\x00Content-Type: application/json\x00{"sub":"user-1","email":"a@example.com","email_verified":true}' \
        '\x00\x00{"sub":"user-2"}' '\x03WWW-Authenticate: Bearer error="invalid_token"\x00' \
        '\x00\x00{"accessToken":"at","refreshToken":"rt","expiresIn":300,"tokenType":"Bearer","user":{"id":"u1","email":"a@example.com"},"id":"u1"}' \
        '\x02\x00{"error":"invalid_grant"}' '\x01\x00'
    seed resource-response '\x45Location: https://evil.example/x\x00' '\xc1WWW-Authenticate: DPoP error="invalid_token"\x00' \
        '\xc1WWW-Authenticate: DPoP error="use_dpop_nonce"\nDPoP-Nonce: n-1\x00' '\x09Location: https://evil.example/steal\x00' '\x09Location: //api.example:8443/v1/me\x00' \
        '\x09Location: /v1/other\x00' '\x8bLocation: http://api.example/v1/me\x00' \
        '\x03WWW-Authenticate: Bearer error="invalid_token"\x00' \
        '\x03WWW-Authenticate: Bearer error="insufficient_user_authentication", acr_values="mfa"\x00' \
        '\x04WWW-Authenticate: Bearer error="insufficient_scope", scope="admin"\x00' '\x06Retry-After: 1\x00' \
        '\x00Content-Type: application/json\x00{"id":"u1"}'
    seed credential-helper 'protocol=https\nhost=api.example\nwwwauth[]=Bearer realm="x"\n\n' \
        'protocol=https\r\nhost=API.EXAMPLE:443\r\npath=v1/me\r\n\r\n' 'protocol=https\nhost=api.example.\n\n' \
        'protocol=https\nhost=api.example@evil.example\n\n' 'protocol=http\nhost=api.example\npassword=at\n\n'
    seed dev-server 'GET /.well-known/openid-configuration HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n' \
        'POST /login HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 51\r\n\r\n{"email":"alice@example.com","password":"password"}' \
        'POST /register HTTP/1.1\r\nHost: localhost:8080\r\nContent-Type: application/json\r\nContent-Length: 52\r\n\r\n{"email":"bob@example.com","password":"pw-12345678"}' \
        'POST /token HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 66\r\n\r\ngrant_type=refresh_token&refresh_token=rt&client_id=sesame-cli&x=1' \
        'GET /authorize?response_type=code&client_id=sesame-cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A5555%2Fcallback&scope=openid&state=s&nonce=n&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n' \
        'POST /device_authorization HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 33\r\n\r\nclient_id=sesame-cli&scope=openid' \
        'GET /userinfo HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: DPoP eyJ.eyJ.sig\r\nDPoP: eyJ.eyJ.sig\r\n\r\n' \
        'GET /me HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer at\r\nCookie: sesame_session=x; sesame_csrf=y\r\n\r\n'
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
    local runs cov ft rate inputs
    runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
    rate=$(grep -oE '^stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
    inputs=$(find "$corpus" -type f | wc -l)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo 0)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$commit" "$harness" "$runs" "$cov" "$ft" \
        "$((status != 0))" >> "$out/$name/runs.tsv"
    if [[ $status -ne 0 ]]; then
        tail -40 "$log"
        local unit
        unit=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | cut -d' ' -f5)
        echo "fuzz.sh: $name: FAILED after $runs executions: the input is ${unit:-(none written)}; the log is $log"
        echo "fuzz.sh: reproduce it with: Scripts/fuzz.sh --replay $name ${unit:+$PWD/}${unit:-FILE}"
        return 1
    fi
    echo "fuzz.sh: $name: $runs executions ($rate/s), cov $cov, ft $ft, corpus $inputs inputs, 0 crashes (log: $log)"
}

build
seeds
harness=$(cat Fuzz/*.swift | sha256sum | cut -c1-12)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
git diff --quiet HEAD -- Sources Fuzz 2>/dev/null || commit+=+changes
case "$target" in
--build) exit 0 ;;
--replay)
    scratch_dir=$(mktemp -d)
    mkdir -p "$out/$2"
    status=0
    launch "$2" "$scratch_dir" full -runs=1 -artifact_prefix="$out/$2/replay-" "$replay_file" || status=$?
    rm -rf "$scratch_dir"
    if [[ $status -eq 0 ]]; then echo "fuzz.sh: $2: the input ran without a failure"; else echo "fuzz.sh: $2: the input failed (above)"; fi
    exit $status
    ;;
all)
    failed=0
    for name in "${targets[@]}"; do run "$name" || failed=1; done
    exit $failed
    ;;
*) run "$target" ;;
esac
