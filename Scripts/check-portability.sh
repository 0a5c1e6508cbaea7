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
# The manifest declares swift-tools-version 6.0 and iOS 16 / macOS 13; only a 6.3 compiler runs here, so refuse the
# language features and APIs that a newer compiler or OS accepts but the declared floor does not (README, Platforms).
floor='Task\.immediate|\bInt128\b|\bUInt128\b|withDiscardingTaskGroup|withThrowingDiscardingTaskGroup|\[[0-9]+ of |^[[:space:]]*((public|package|internal|private|fileprivate)[[:space:]]+)?nonisolated[[:space:]]+(extension|struct|enum|actor|(final[[:space:]]+)?class)\b|(struct|class|enum|extension)[^{]*:[[:space:]]*@MainActor|isolated[[:space:]]+deinit|nonisolated\(nonsending\)|@concurrent|InlineArray|MutableSpan|RawSpan|\bSpan<|weak[[:space:]]+let|@abi\(|^[[:space:]]*(public |package |internal )?import[[:space:]]+Synchronization|\bMutex<|\bAtomic<|func[[:space:]]+`[^`]*[[:space:]][^`]*`'
if grep -rnE "$floor" Sources --include='*.swift' | grep -v '^[^:]*:[0-9]*:[[:space:]]*//'; then
    echo "check-portability.sh: the lines above need a newer Swift or OS than Package.swift declares"
    status=1
fi
# Trailing commas in argument and parameter lists are Swift 6.1.
for file in $(find Sources Tests Benchmarks -name '*.swift'); do
    awk -v file="$file" 'prev ~ /,[ \t]*$/ && $0 ~ /^[ \t]*\)/ { printf "%s:%d: a trailing comma before ) needs Swift 6.1\n", file, NR; bad = 1 }
        { prev = $0 } END { exit bad }' "$file" || status=1
done
# Foundation's Process.run() on Linux (Swift 6.3.1) can crash a process holding over about 1,350 descriptors (it did,
# in the test suite): processes start through SesameLoopback's ChildProcess, whose macOS branch is the one use.
process='(^|[^A-Za-z_.])(Foundation\.)?Process([[:space:]]*\(|\.init\b|\.run\b|\.launchedProcess)|(:|->|\[|<|\()[[:space:]]*(Foundation\.)?Process([^A-Za-z_]|$)'
if grep -rnE "$process" Sources Tests Fuzz Benchmarks Examples \
    --include='*.swift' | grep -vE '^Sources/SesameLoopback/ChildProcess\.swift:|^[^:]*:[0-9]*:[[:space:]]*//'; then
    echo "check-portability.sh: the lines above start a process through Foundation's Process: use ChildProcess"
    status=1
fi
[ $status -eq 0 ] && echo "check-portability.sh: clean"
exit $status
