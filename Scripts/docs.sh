#!/usr/bin/env bash
# Builds the DocC documentation with the toolchain's docc (no package plugin), warnings as errors.
#   Scripts/docs.sh [OUTPUT_DIR]     default .build/docs
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.build/docs}"
graphs=.build/docs-build/symbol-graphs
# An up-to-date build emits no symbol graphs, so start the documentation build afresh when they are missing.
[ -f "$graphs/SesameJOSE.symbols.json" ] && [ -f "$graphs/Sesame.symbols.json" ] || rm -rf .build/docs-build
mkdir -p "$graphs" "$out"
# Each module's catalog is converted with its own symbol graph only.
sort_graphs() {
    for module in SesameJOSE Sesame; do
        mkdir -p "$graphs/$module"
        cp "$graphs/$module.symbols.json" "$graphs/$module/" 2>/dev/null || true
    done
}
swift build --scratch-path .build/docs-build --target Sesame -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" >/dev/null
sort_graphs
for module in SesameJOSE Sesame; do
    docc convert "Sources/$module/$module.docc" --fallback-display-name "$module" --fallback-bundle-identifier "dev.sesame.$module" \
        --additional-symbol-graph-dir "$graphs/$module" --output-path "$out/$module.doccarchive" --warnings-as-errors
    echo "docs.sh: $out/$module.doccarchive"
done
