#!/usr/bin/env bash
# The device check of the CUDA backend (issue 12), for a machine with an
# NVIDIA GPU: builds with CUDA and runs every CUDA test -- each op against
# the CPU kernels, and the CUDA model runner against the CPU runner (golden
# stories260K, mixed-adapter batches, prefill and decode) -- and fails if
# any of them failed or skipped (no device seen, or ../shared missing).
# Needs what scripts/setup.sh installs and ../shared (LORAGATE_SHARED_DIR).
#
# Not here yet: a GPU benchmark (decode step against the HBM roofline,
# prefill against peak bf16, SGMV latency, multi-LoRA ratios on the 8b
# preset). `loragate bench decode` runs on the CPU runner only.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build-gpu}"
mkdir -p "$out"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLORAGATE_CUDA=ON > "$out/configure.log"
cmake --build build-gpu -j "$(nproc)" --target lg_cuda_tests > "$out/build.log"

status=0
./build-gpu/tests/lg_cuda_tests 2>&1 | tee "$out/cuda-tests.log" || status=$?
if grep -q "^\[  SKIPPED \]" "$out/cuda-tests.log"; then
  echo "gpu-check: FAILED: CUDA tests skipped, so no device was used (see $out/cuda-tests.log)"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "gpu-check: FAILED: lg_cuda_tests exited $status"
  exit "$status"
fi
echo "gpu-check: every CUDA test passed on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
