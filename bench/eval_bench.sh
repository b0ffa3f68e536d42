#!/usr/bin/env bash
# The evaluator's cost: (1) wall time of a full offline evaluation of the
# shared suite (configs/eval-suite.yaml on ../shared/eval), median of 3;
# (2) live traffic on the serving base with and without a loop of
# evaluations inside the server (background priority: issue 20), interleaved,
# 3 rounds, medians; the last column is the live p99 TTFT against alone.
# Usage:
#   bench/eval_bench.sh [SHARED_DIR]
# Environment: LORAGATE_BIN (default ./build/cli/loragate), ROUNDS (3),
# REQUESTS (live requests a round, 200), OFFLINE_RUNS (3; 0 skips part 1).
set -euo pipefail
cd "$(dirname "$0")/.."
S=$(realpath "${1:-../shared}")
bin=$(realpath "${LORAGATE_BIN:-./build/cli/loragate}")
rounds=${ROUNDS:-3}
requests=${REQUESTS:-200}
offline_runs=${OFFLINE_RUNS:-3}
work=$(mktemp -d)
trap 'kill "${evals:-}" "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
echo "uptime: $(uptime)"
offline() {
  "$bin" eval run --online "$S/models/stories260K" --candidate "$S/eval/bases/candidate-good" \
    --online-adapters "$S/eval/adapters/online" --candidate-adapters "$S/eval/adapters/candidate-good" \
    --suite configs/eval-suite.yaml --db "$work/offline.db" > /dev/null
}
for i in $(seq 1 "$offline_runs"); do
  s=$(date +%s.%N); offline; e=$(date +%s.%N)
  echo "offline $(python3 -c "print($e - $s)")"
done | tee "$work/offline"
if [ "$offline_runs" -gt 0 ]; then
  python3 -c "import statistics,sys; v=[float(l.split()[1]) for l in open('$work/offline')]; print(f'offline full evaluation: median {statistics.median(v):.2f} s of {v}')"
fi

export LORAGATE_ADMIN_TOKEN=bench LORAGATE_URL
"$bin" serve --model "$S/models/stories260K" --served-name online --adapter-root "$S/eval/adapters" \
  --base-root "$S/eval/bases" --eval-root "$(pwd)/configs" --eval-root "$S/eval" --registry "$work/registry.db" --port 0 > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  LORAGATE_URL=$(grep -o 'on http://[0-9.:]*' "$work/server.log" | head -1 | cut -c4- || true)
  [ -n "$LORAGATE_URL" ] && break
  sleep 0.1
done
for s in mia cat sunny; do
  "$bin" adapter add $s "$S/eval/adapters/online/$s" > /dev/null && "$bin" scenario set $s $s > /dev/null
done
"$bin" base add candidate-good "$S/eval/bases/candidate-good" > /dev/null
for s in mia cat sunny; do
  "$bin" adapter add $s "$S/eval/adapters/candidate-good/$s" --base candidate-good > /dev/null
  "$bin" scenario set $s $s --base candidate-good > /dev/null
done
live() {
  "$bin" bench serve --url "$LORAGATE_URL" --rate 20 --requests "$requests" --adapter-names mia,cat,sunny --adapters 3 \
    --prompt-len 16 --max-tokens 32 --seed 5 --result-json "$work/r.json" > /dev/null
  python3 -c "import json; r=json.load(open('$work/r.json')); print(r['output_throughput'], r['ttft_ms']['median'], r['ttft_ms']['p99'], r['completed'], r['failed'])"
}
evaluate_forever() {
  while true; do "$bin" eval run --url "$LORAGATE_URL" --candidate candidate-good --suite configs/eval-suite.yaml > /dev/null 2>&1 || true; done
}
for round in $(seq 1 "$rounds"); do
  echo "alone $(live)" | tee -a "$work/live"
  evaluate_forever & evals=$!
  sleep 0.5
  echo "evaluating $(live)" | tee -a "$work/live"
  kill $evals 2>/dev/null; wait $evals 2>/dev/null || true
  sleep 3  # the evaluation in flight ends
done
"$bin" eval ls --db "$work/registry.db" | tail -n +2 | wc -l | xargs echo "server evaluations completed during the runs:"
python3 - "$work/live" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, *v = line.split()
    rows.setdefault(k, []).append([float(x) for x in v])
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
print("| live traffic | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | completed / failed | p99 vs alone |")
print("|---|---|---|---|---|---|")
for k in ("alone", "evaluating"):
    m = med[k]; done = sum(int(r[3]) for r in rows[k]); failed = sum(int(r[4]) for r in rows[k])
    print(f"| {k} | {m[0]:.0f} | {m[1]:.1f} | {m[2]:.1f} | {done} / {failed} | {m[2]/med['alone'][2]:.2f} |")
PY
