#!/usr/bin/env bash
# Quick start #1: sets everything up, builds, and serves the gateway on its
# embedded default — a small demo model with three LoRA adapters and
# scenarios, synthesised on first run into .cache/loragate/demo. Extra
# arguments go to `loragate serve` (e.g. --port 9000, --config FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec ./build/cli/loragate serve "$@"
