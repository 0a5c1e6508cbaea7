#!/usr/bin/env bash
# Fails if a portable module imports an Apple-only framework outside a `#if canImport(...)` block, or imports
# libcrypto outside an OpenSSL backend file (STYLE.md §1).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
apple='^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*((public|package|internal)[[:space:]]+)?import[[:space:]]+(UIKit|AppKit|Security|CryptoKit|AuthenticationServices|LocalAuthentication)\b'
for file in $(find Sources -name '*.swift' -not -path 'Sources/SesameApple/*'); do
    # Lines importing an Apple framework must sit inside an #if canImport block.
    awk -v file="$file" -v pattern="$apple" '
        /^[[:space:]]*#if[[:space:]].*canImport/ { depth++ }
        /^[[:space:]]*#endif/ { if (depth > 0) depth-- }
        $0 ~ pattern && depth == 0 { printf "%s:%d: unguarded Apple-only import\n", file, NR; bad = 1 }
        END { exit bad }
    ' "$file" || status=1
    if grep -qE '^[[:space:]]*import[[:space:]]+CSesameOpenSSL' "$file" && [[ "$file" != *+OpenSSL.swift ]]; then
        echo "$file: CSesameOpenSSL may only be imported by +OpenSSL backend files"
        status=1
    fi
done
[ $status -eq 0 ] && echo "check-portability.sh: clean"
exit $status
