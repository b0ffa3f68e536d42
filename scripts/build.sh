#!/usr/bin/env bash
# Configures and builds loragate (Release) into ./build with two jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[ -f build/CMakeCache.txt ] || cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "${LORAGATE_JOBS:-2}"
