#!/usr/bin/env bash
# Fuzzes SesameJOSE's parsers with libFuzzer (in the toolchain): JSON, compact JWT, JWK, JWK Set, base64url and
# full verification. A SwiftPM executable cannot link -sanitize=fuzzer, so the module's sources and the harness
# are compiled together with swiftc (GROUND.md).
#   Scripts/fuzz.sh [SECONDS]     default 60; crashes are written to .build/fuzz/crash-*
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=.build/fuzz
mkdir -p "$out/corpus"
# Seeds: a real token, a JWKS and JSON with escapes.
printf '%s' 'eyJhbGciOiJFUzI1NiIsImtpZCI6ImZ1enoifQ.eyJzdWIiOiJhIiwiZXhwIjoxfQ.AAAA' > "$out/corpus/token"
printf '%s' '{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}' > "$out/corpus/jwks"
printf '%s' '{"a":"\u00e9\ud83d\ude00","b":[1,2.5e3,true,null]}' > "$out/corpus/json"
mapfile -t sources < <(find Sources/SesameJOSE -name '*.swift' -not -name '*+CryptoKit.swift' -not -name '*+Security.swift')
swiftc -sanitize=fuzzer,address -parse-as-library -O -swift-version 6 -module-name SesameJOSE \
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault \
    -enable-upcoming-feature MemberImportVisibility -package-name sesame \
    -I Sources/CSesameOpenSSL -lcrypto "${sources[@]}" Fuzz/JOSEFuzz.swift -o "$out/jose-fuzz"
"$out/jose-fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=5 -artifact_prefix="$out/" "$out/corpus"
