#!/usr/bin/env bash
# Formats the sources with the toolchain's swift-format, then lints strictly (as CI does).
#   Scripts/format.sh          format in place, then lint
#   Scripts/format.sh --lint   lint only (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(Package.swift Sources Tests Benchmarks Fuzz Examples/Package.swift Examples/iOSApp Examples/LinuxCLI Examples/Tests Integrations/SesameAlamofire/Package.swift Integrations/SesameAlamofire/Sources Integrations/SesameAlamofire/Tests)
if [ "${1:-}" != "--lint" ]; then
    swift format format --in-place --recursive --parallel "${paths[@]}"
fi
swift format lint --strict --recursive --parallel "${paths[@]}"
echo "format.sh: lint clean"
