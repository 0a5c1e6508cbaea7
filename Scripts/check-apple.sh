#!/usr/bin/env bash
# The Apple check: every module the package builds for Apple platforms, compiled here as Apple's compiler would see
# it, as far as Linux allows, against the stand-ins in Checks/AppleStubs (written from Apple's documentation).
# Needs only the toolchain (and libsqlite3-dev for the dev server's C module).
#
# For each platform checked (iOS, macOS, tvOS, watchOS, visionOS) Scripts/apple_check_copy.py writes a check copy
# of the sources in which
#   - `os(...)` conditions are those of that platform, so its branches are compiled and Linux's are not;
#   - every struct holds a resilient value, so it is address-only as a struct holding Foundation's Date is there
#     (exclusivity errors that only Apple's build reports);
#   - in Apple-only code (SesameApple, the iOS example) NSObject is ObjectiveC's, not Foundation's ("public import
#     of 'Foundation' was not used" as on Apple).
# Each module is compiled to SIL (the exclusivity and initialization diagnostics run there, not in -typecheck)
# with warnings counted as failures, then Scripts/apple_availability.py reads what every reference resolved to and
# refuses what the platform does not have (FileManager.homeDirectoryForCurrentUser on iOS, Glibc-only spellings
# outside a Linux-only #if).
#
#   Scripts/check-apple.sh              check every platform (about a minute each)
#   Scripts/check-apple.sh iOS macOS    only these (the names as written here)
#   Scripts/check-apple.sh --mutation   put back each class of error the check exists for (the four an Apple SDK
#                                       compile found, an error planted in SesameApple, a wrong call in the CryptoKit
#                                       backend), then compile the guard's own cases (Checks/AppleCheckCases): each
#                                       must fail it with the diagnostic it exists for (about 3.5 minutes)
#
# What it cannot see: Apple's run-time behaviour, the stand-ins' fidelity beyond what they declare, and Darwin's C
# library (Glibc stands in for it, so `#if canImport(Darwin)` halves stay unchecked): see CONTRIBUTING.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$root/.build/apple-check
mutation=false
platforms=()
for argument in "$@"; do
    case $argument in
    --mutation) mutation=true ;;
    macOS | iOS | tvOS | watchOS | visionOS) platforms+=("$argument") ;;
    *) echo "usage: Scripts/check-apple.sh [--mutation] [iOS|macOS|tvOS|watchOS|visionOS ...]" >&2 && exit 2 ;;
    esac
done
[ ${#platforms[@]} -gt 0 ] || platforms=(iOS macOS tvOS watchOS visionOS)

# The stand-ins, as modules (ObjectiveC first: the frameworks' NSObject is its).
stubs=$work/stubs
mkdir -p "$stubs"
for stub in ObjectiveC Security CommonCrypto LocalAuthentication CryptoKit AuthenticationServices os SwiftUI; do
    swiftc -emit-module -parse-as-library -swift-version 5 -module-name "$stub" -I "$stubs" \
        "$root/Checks/AppleStubs/$stub.swift" -emit-module-path "$stubs/$stub.swiftmodule"
done

package_name=$(basename "$root" | tr '[:upper:]' '[:lower:]')
flags=(-swift-version 6 -package-name "$package_name" -I "$stubs")
# The package's settings (Package.swift); the iOS example is an app target of its own, in Swift 6 mode only.
features=(-enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault
    -enable-upcoming-feature MemberImportVisibility)
sqlite=(-Xcc "-fmodule-map-file=$root/Sources/CSQLite/module.modulemap")  # Debian's sqlite3.h for Apple's SQLite3

# module, source folder, what the check copy needs (objc), how it is compiled (library or executable), platforms.
modules=(
    "SesameJOSE Sources/SesameJOSE - library all"
    "SesameLoopback Sources/SesameLoopback - library all"
    "Sesame Sources/Sesame - library all"
    "SesameApple Sources/SesameApple objc library all"
    "SesameTesting Sources/SesameTesting - library all"
    "SesameDevServer Sources/SesameDevServer - library all"
    "ExampleApp Examples/iOSApp objc library iOS"
    "sesame Sources/sesame - executable macOS"
    "sesame_bench Benchmarks/sesame-bench - executable macOS"
    "sesame_exit_probe Tests/ExitProbe - executable macOS"
)

failed=0
# Compiles one module of the check copy and reads its references; prints what is wrong, returns non-zero then.
compile() {  # platform, module, copy folder, source folder, kind[, folder for the .swiftmodule]
    local platform=$1 module=$2 copy=$3 source=$4 kind=$5 status=0 out
    local mods=$work/$platform/modules emitted=${6:-$work/$platform/modules}
    local ast=$work/$platform/$module.ast
    local args=("${flags[@]}" -I "$mods" "${sqlite[@]}" -module-name "$module")
    [ "$kind" = library ] && args+=(-parse-as-library)
    [ "$module" = ExampleApp ] || args+=("${features[@]}")
    mapfile -t files < <(find "$copy" -name '*.swift' | sort)
    # SIL into a file of ours, never `-o /dev/null`: the compiler writes its output by renaming a temporary file
    # over the path, which would leave /dev/null a regular file for everyone.
    out=$(swiftc -wmo -emit-sil -o "$work/$platform/$module.sil" -emit-module \
        -emit-module-path "$emitted/$module.swiftmodule" "${args[@]}" "${files[@]}" 2>&1) || status=$?
    rm -f "$work/$platform/$module.sil"
    # The diagnostics as Apple's compiler would give them (the check copy's added imports are not ours).
    out=$(python3 "$root/Scripts/apple_check_copy.py" --filter "$copy" "$source" <<<"$out")
    if [ "$status" -ne 0 ] || [ -n "$out" ]; then
        echo "${out:-swiftc exited with $status and no diagnostic}" | head -40
        return 1
    fi
    # The AST goes to standard output for one file and to standard error for several: keep both.
    swiftc -dump-ast "${args[@]}" "${files[@]}" >"$ast" 2>&1 || status=$?
    [ "$status" -eq 0 ] || { echo "swiftc -dump-ast failed for $module (exit $status)"; return 1; }
    python3 "$root/Scripts/apple_availability.py" --platform "$platform" --map "$copy=$source" "$ast" || status=$?
    rm -f "$ast"
    return "$status"
}

# Writes the check copy of every module for `platform`.
prepare() {  # platform
    local platform=$1 entry
    rm -rf "${work:?}/$platform"
    mkdir -p "$work/$platform/modules" "$work/$platform/copy"
    for entry in "${modules[@]}"; do
        read -r module source objc _ _ <<<"$entry"
        local options=(--platform "$platform" --out "$work/$platform/copy/$module")
        [ "$objc" = objc ] && options+=(--objc)
        python3 "$root/Scripts/apple_check_copy.py" "${options[@]}" "$source"
    done
}

# Checks every module `platform` builds, in dependency order.
check_platform() {  # platform
    local platform=$1 entry checked=()
    prepare "$platform"
    for entry in "${modules[@]}"; do
        read -r module source _ kind where <<<"$entry"
        [ "$where" = all ] || [ "$where" = "$platform" ] || continue
        if ! compile "$platform" "$module" "$work/$platform/copy/$module/$(basename "$source")" "$source" "$kind"
        then
            echo "check-apple.sh: $module does not compile for $platform against the Apple stand-ins (above; warnings"
            echo "  count as failures)"
            failed=1
            return
        fi
        checked+=("$module")
    done
    echo "check-apple.sh: compiled for $platform against the Apple stand-ins (SIL, warnings as errors, availability):"
    echo "  ${checked[*]}"
}

# One planted error: a copy of the module's sources with `expression` applied to one file, made into a check copy
# and compiled against the unchanged modules; it must fail, saying `expected`.
expect_caught() {  # platform, module, source folder, kind, file (in the folder), perl expression, expected, what
    local platform=$1 module=$2 source=$3 kind=$4 file=$5 expression=$6 expected=$7 what=$8
    local mutant=$work/mutant options=(--platform "$platform" --out "$work/mutant/copy")
    rm -rf "$mutant"
    mkdir -p "$mutant/sources" "$mutant/modules"
    cp -r "$source" "$mutant/sources/"
    local planted=$mutant/sources/$(basename "$source")/$file
    perl -0pi -e "$expression" "$planted"
    if cmp -s "$planted" "$source/$file"; then
        echo "check-apple.sh: could not plant: $what"
        failed=1
        return
    fi
    [ "$module" = SesameApple ] && options+=(--objc)
    python3 "$root/Scripts/apple_check_copy.py" "${options[@]}" "$mutant/sources/$(basename "$source")"
    judge "$platform" "$module" "$mutant/copy/$(basename "$source")" "$source" "$kind" "$expected" "$what"
    rm -rf "$mutant"
}

# Compiles a copy that must fail with `expected` in its diagnostics.
judge() {  # platform, module, copy folder, source folder, kind, expected, what
    local platform=$1 module=$2 copy=$3 source=$4 kind=$5 expected=$6 what=$7
    if compile "$platform" "$module" "$copy" "$source" "$kind" "$work/mutant/modules" >"$work/mutation.log" 2>&1
    then
        echo "check-apple.sh: NOT caught on $platform: $what"
        failed=1
    elif ! grep -qF "$expected" "$work/mutation.log"; then
        echo "check-apple.sh: failed for another reason on $platform: $what (expected: $expected)"
        head -5 "$work/mutation.log"
        failed=1
    else
        echo "check-apple.sh: caught on $platform: $what"
        echo "  $(grep -m1 -F "$expected" "$work/mutation.log")"
    fi
}

# The guard's own cases (Checks/AppleCheckCases): each file, a module of its own, must fail as its first line says.
check_cases() {
    local case expected platform copy
    for case in "$root"/Checks/AppleCheckCases/*.swift; do
        expected=$(sed -n '1s|^// expect (\([A-Za-z]*\)): ||p' "$case")
        platform=$(sed -n '1s|^// expect (\([A-Za-z]*\)):.*|\1|p' "$case")
        [ -n "$expected" ] || { echo "check-apple.sh: $case has no '// expect (PLATFORM): PATTERN' line"; failed=1; continue; }
        rm -rf "$work/mutant"
        mkdir -p "$work/mutant/source" "$work/mutant/modules"
        cp "$case" "$work/mutant/source/"
        python3 "$root/Scripts/apple_check_copy.py" --platform "$platform" --objc --out "$work/mutant/copy" \
            "$work/mutant/source"
        copy=$work/mutant/copy/source
        judge "$platform" Case "$copy" "$root/Checks/AppleCheckCases" library "$expected" \
            "$(sed -n '2s|^// ||p' "$case") ($(basename "$case"))"
    done
    rm -rf "$work/mutant"
}

if $mutation; then
    for platform in iOS macOS; do check_platform "$platform"; done
    [ "$failed" -eq 0 ] || exit 1
    expect_caught iOS Sesame Sources/Sesame library Session/SessionMachine.swift \
        's/let window = budget\.window\n(\s*)refreshTimes\.removeAll \{ now - \$0 > window \}/$1refreshTimes.removeAll { now - \$0 > budget.window }/' \
        "overlapping accesses" "a closure reading self inside a mutating call on another stored property (SessionMachine.charge)"
    expect_caught iOS Sesame Sources/Sesame library Credentials/ProfileLock.swift \
        's/return containerDefaultDirectory/return FileManager.default.homeDirectoryForCurrentUser/' \
        "is unavailable in iOS" "FileManager.homeDirectoryForCurrentUser in code built for iOS (ProfileLock.defaultDirectory)"
    expect_caught iOS SesameApple Sources/SesameApple library SignInWithApple.swift \
        's/\n    import Foundation\n/\n    public import Foundation\n/' \
        "public import of 'Foundation' was not used" "a public import of Foundation used only for NSObject (SignInWithApple.swift)"
    expect_caught macOS sesame_bench Benchmarks/sesame-bench executable SessionBenchmark.swift \
        's/#if canImport\(Glibc\)\n(\s*getrusage\(RUSAGE_SELF\.rawValue, &usage\).*\n)\s*#else\n.*\n\s*#endif/$1/' \
        "exists only in Glibc" "Glibc's RUSAGE_SELF.rawValue outside a Linux-only #if (the benchmark)"
    expect_caught iOS SesameApple Sources/SesameApple library SecItemKeychain.swift \
        's/(\n\s*extension KeychainTokenStore \{)/\nlet plantedError: Int = "planted"$1/' \
        "cannot convert value" "a type error planted in SesameApple"
    expect_caught iOS SesameJOSE Sources/SesameJOSE library Crypto/Backends/BackingKey+CryptoKit.swift \
        's/try key\.signature\(for: data\)\.rawRepresentation/try key.signature(of: data).rawRepresentation/' \
        "incorrect argument label" "a wrong argument label in the CryptoKit backend"
    check_cases
    [ -c /dev/null ] || { echo "check-apple.sh: /dev/null is no longer a device (a compiler wrote over it)"; exit 1; }
    [ "$failed" -eq 0 ] || exit 1
    echo "check-apple.sh: every planted error was caught"
    exit 0
fi

for platform in "${platforms[@]}"; do check_platform "$platform"; done
[ -c /dev/null ] || { echo "check-apple.sh: /dev/null is no longer a device (a compiler wrote over it)"; exit 1; }
[ "$failed" -eq 0 ] || exit 1
echo "check-apple.sh: only a Mac can check Apple's run-time behaviour (Keychain, Secure Enclave, CryptoKit, Security"
echo "  RSA, ASWebAuthenticationSession), the stand-ins' fidelity, and the canImport(Darwin) halves (CONTRIBUTING.md)"
