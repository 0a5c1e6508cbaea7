#!/usr/bin/env bash
# Builds the DocC documentation with the toolchain's docc (no package plugin), warnings as errors.
#   Scripts/docs.sh [OUTPUT_DIR]     default .build/docs
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.build/docs}"
graphs=.build/docs-build/symbol-graphs
# An up-to-date build emits no symbol graphs, so start the documentation build afresh when they are missing.
[ -f "$graphs/SesameJOSE.symbols.json" ] || rm -rf .build/docs-build
mkdir -p "$graphs" "$out"
swift build --scratch-path .build/docs-build --target SesameJOSE -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" >/dev/null
for module in SesameJOSE; do
    docc convert "Sources/$module/$module.docc" --fallback-display-name "$module" --fallback-bundle-identifier "dev.sesame.$module" \
        --additional-symbol-graph-dir "$graphs" --output-path "$out/$module.doccarchive" --warnings-as-errors
    echo "docs.sh: $out/$module.doccarchive"
done
