#!/usr/bin/env bash
# loragate's LoRA training throughput beside a minimal PyTorch loop on the same
# model, recipe, examples and thread count, interleaved (A B A B ...), with the
# medians over rounds and their ratio. See BENCHMARKS.md ("Training").
#
#   bench/train_compare.sh --model DIR [--data FILE] [--batch 16] [--seq-len 128]
#       [--steps 4] [--repeats 3] [--threads 2] [--rank 8] [--rounds 3]
#       [--torch-blas-threads N] [--loragate build/cli/loragate]
#
# A: `loragate bench train` (its first round also writes the examples it
#    used with --dump-examples); B: bench/torch_lora_train.py on those examples.
# Each side's figure per round is the median of its --repeats; the table gives
# the median over rounds.
#
# Needs Debian's python3-torch and OpenBLAS (libopenblas0-pthread): Debian's
# torch calls the system libblas.so.3, and the netlib reference BLAS that is
# Debian's default would make PyTorch several times slower than it is, so B
# runs with LD_LIBRARY_PATH pointing at OpenBLAS, with --torch-blas-threads
# threads of its own (default: --threads; torch's own intra-op threads are
# --threads too, and on a small model the two sets oversubscribe the cores:
# see BENCHMARKS.md). Neither is a dependency of loragate or installed in CI:
# when missing, this script installs them as root (installing
# libopenblas0-pthread also makes it the system's libblas.so.3 alternative) or
# prints the command to run.
set -euo pipefail

model="" data="" batch=16 seq_len=128 steps=4 repeats=3 threads=2 rank=8 rounds=3 blas_threads=""
loragate="build/cli/loragate"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --seq-len) seq_len="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rank) rank="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --torch-blas-threads) blas_threads="$2"; shift 2 ;;
    --loragate) loragate="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
blas_threads="${blas_threads:-$threads}"
[[ -n "$model" ]] || { echo "usage: $0 --model DIR [--data FILE] [...]" >&2; exit 2; }
[[ -x "$loragate" ]] || { echo "$loragate: not built (cmake --build build --target loragate)" >&2; exit 2; }

python=/usr/bin/python3
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
need=()
"$python" -c "import torch" 2>/dev/null || need+=(python3-torch)
[[ -e "$openblas/libblas.so.3" ]] || need+=(libopenblas0-pthread)
if [[ ${#need[@]} -gt 0 ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "installing ${need[*]} (for this comparison only; not a loragate dependency)"
    apt-get install -y "${need[@]}" >/dev/null
  else
    echo "missing ${need[*]}: run  sudo apt-get install -y ${need[*]}  and retry" >&2
    exit 2
  fi
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d /tmp/lg-train-compare.XXXXXX)"
trap 'rm -rf "$work"' EXIT
examples="$work/examples.jsonl"

echo "machine: $(nproc) cores; uptime: $(uptime)"
echo "model $model, batch $batch, ${data:-synthetic examples of $seq_len tokens}, rank $rank," \
  "$steps steps x $repeats repeats per run, $threads threads (torch's OpenBLAS: $blas_threads), $rounds rounds"

common=(--model "$model" --batch "$batch" --steps "$steps" --repeats "$repeats" --threads "$threads" --rank "$rank")
lg_args=("${common[@]}" --seq-len "$seq_len")
[[ -n "$data" ]] && lg_args+=(--data "$data")

lg_tps=() lg_sps=() pt_tps=() pt_sps=()
for ((round = 1; round <= rounds; round++)); do
  extra=()
  [[ $round -eq 1 ]] && extra=(--dump-examples "$examples")
  echo "== round $round: loragate ($(uptime | sed 's/.*load average/load average/'))"
  "$loragate" bench train "${lg_args[@]}" "${extra[@]}" | tee "$work/lg.txt"
  lg_tps+=("$(awk '$1 == "tokens/s" { print $2 }' "$work/lg.txt")")
  lg_sps+=("$(awk '$1 == "steps/s" { print $2 }' "$work/lg.txt")")

  echo "== round $round: torch ($(uptime | sed 's/.*load average/load average/'))"
  LD_LIBRARY_PATH="$openblas" OPENBLAS_NUM_THREADS="$blas_threads" \
    "$python" "$here/torch_lora_train.py" "${common[@]}" --examples "$examples" | tee "$work/pt.txt"
  pt_tps+=("$(awk '$1 == "median:" { print $2 }' "$work/pt.txt")")
  pt_sps+=("$(awk '$1 == "median:" { print $4 }' "$work/pt.txt")")
done

median() {
  printf '%s\n' "$@" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
lg="$(median "${lg_tps[@]}")" pt="$(median "${pt_tps[@]}")"
echo
echo "== medians over $rounds rounds (uptime after: $(uptime | sed 's/.*load average/load average/'))"
printf '%-10s %12s %10s   %s\n' side "tokens/s" "steps/s" "per round (tokens/s)"
printf '%-10s %12.1f %10.4f   %s\n' loragate "$lg" "$(median "${lg_sps[@]}")" "${lg_tps[*]}"
printf '%-10s %12.1f %10.4f   %s\n' torch "$pt" "$(median "${pt_sps[@]}")" "${pt_tps[*]}"
awk -v a="$lg" -v b="$pt" 'BEGIN { printf "loragate / torch: %.2fx\n", a / b }'
