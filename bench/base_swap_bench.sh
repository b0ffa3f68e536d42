#!/usr/bin/env bash
# Serving throughput and TTFT of the serving base (a) alone, (b) with an idle
# candidate base loaded beside it, (c) with the candidate under a scoring
# load (X-Base + echo/logprobs, max_tokens 0) — interleaved a, b, c per
# round, medians over the rounds, in one run. Usage:
#   bench/base_swap_bench.sh [ROUNDS] [RATE]     (defaults 3, 2 req/s)
# Needs ./build/cli/loragate; writes its models under /tmp/lgb.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
rate=${2:-2}
bin=./build/cli/loragate
work=$(mktemp -d)
trap 'kill "${scorers[@]:-}" "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p /tmp/lgb
[ -f /tmp/lgb/m110/config.json ] || "$bin" synth-model --out /tmp/lgb/m110 --preset 110m --seed 1 > /dev/null
[ -f /tmp/lgb/m110b/config.json ] || "$bin" synth-model --out /tmp/lgb/m110b --preset 110m --seed 2 > /dev/null
export LORAGATE_ADMIN_TOKEN=bench
cat > "$work/config.yaml" <<YAML
model: {path: /tmp/lgb/m110, served_name: online, dtype: bf16}
adapters: {registry: $work/registry.db}
bases: {roots: [/tmp/lgb]}
engine: {max_num_batched_tokens: 512, kv_cache_mib: 256, candidate_share: 0.25}
server: {max_queued_requests: 1024}
YAML
"$bin" serve --config "$work/config.yaml" --port 0 > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  url=$(grep -o 'on http://[0-9.:]*' "$work/server.log" | head -1 | cut -c4- || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/server.log"; exit 1; }
auth=(-H "Authorization: Bearer $LORAGATE_ADMIN_TOKEN")
candidate() {  # load | unload
  if [ "$1" = load ]; then
    curl -sf "${auth[@]}" "$url/admin/bases" -d '{"name": "candidate", "path": "/tmp/lgb/m110b", "dtype": "bf16"}' > /dev/null
    until curl -sf "${auth[@]}" "$url/admin/bases" |
      python3 -c 'import json,sys; sys.exit(0 if any(b["name"] == "candidate" and b["state"] == "candidate" for b in json.load(sys.stdin)["data"]) else 1)'; do
      sleep 0.2
    done
  else
    curl -sf "${auth[@]}" -X DELETE "$url/admin/bases/candidate" > /dev/null || true
  fi
}
# 128-token scoring requests on the candidate, two at a time, until killed.
prompt=$(python3 -c 'import random; r=random.Random(7); print([1]+[r.randrange(3, 32000) for _ in range(127)])')
score_loop() {
  while true; do
    curl -s "${auth[@]}" -H 'X-Base: candidate' -H 'Content-Type: application/json' "$url/v1/completions" \
      -d "{\"prompt\": $prompt, \"echo\": true, \"logprobs\": 1, \"max_tokens\": 0}" > /dev/null || true
  done
}
run_load() {  # -> "req/s tok/s ttft_p50 ttft_p99"
  "$bin" bench serve --url "$url" --rate "$rate" --requests 40 --adapters 0 --prompt-len 64 --max-tokens 64 \
    --token-ids --vocab 32000 --seed 11 --result-json "$work/r.json" > /dev/null
  python3 -c "import json; r=json.load(open('$work/r.json')); print(r['request_throughput'], r['output_throughput'], r['ttft_ms']['median'], r['ttft_ms']['p99'], r['completed'], r['failed'])"
}
echo "rounds $rounds, rate $rate req/s, 40 requests of 64 prompt + 64 output tokens, 110m bf16, uptime: $(uptime)"
for r in $(seq 1 "$rounds"); do
  candidate unload; echo "alone $(run_load)" | tee -a "$work/results"
  candidate load; echo "idle $(run_load)" | tee -a "$work/results"
  scorers=(); score_loop & scorers+=($!); score_loop & scorers+=($!)
  echo "scoring $(run_load)" | tee -a "$work/results"
  kill "${scorers[@]}" 2>/dev/null || true; wait "${scorers[@]}" 2>/dev/null || true; scorers=()
done
python3 - "$work/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, *v = line.split()
    rows.setdefault(k, []).append([float(x) for x in v])
med = {k: [statistics.median(col) for col in zip(*v)] for k, v in rows.items()}
print("| condition | req/s | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | completed / failed (all rounds) | tok/s vs alone | p99 TTFT vs alone |")
print("|---|---|---|---|---|---|---|---|")
for k in ("alone", "idle", "scoring"):
    m = med[k]; done = sum(int(r[4]) for r in rows[k]); failed = sum(int(r[5]) for r in rows[k])
    print(f"| {k} | {m[0]:.2f} | {m[1]:.1f} | {m[2]:.0f} | {m[3]:.0f} | {done} / {failed} | {m[1]/med['alone'][1]:.2f} | {m[3]/med['alone'][3]:.2f} |")
PY
