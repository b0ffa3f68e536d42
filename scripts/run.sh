#!/usr/bin/env bash
# Quick start #1: sets everything up, builds, and runs loragate's main job on
# its embedded default. Until the gateway lands, that job is generation:
# stories260K from ../shared when present, else a synthesised tiny model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
model=../shared/models/stories260K
if [ ! -f "$model/model.safetensors" ]; then
  model=.cache/demo-tiny
  [ -f "$model/model.safetensors" ] || ./build/cli/loragate synth-model --out "$model" --preset tiny --seed 1
fi
./build/cli/loragate generate --model "$model" --prompt "Once upon a time" -n 48 --temperature 0 --ids
