#!/usr/bin/env bash
# Prefix caching (issue 23): two `loragate serve` children on the 110m model
# (bf16, 8 preloaded rank-16 adapters), one with --prefix-caching and one
# with --no-prefix-caching, driven by `loragate bench serve` with three
# workloads, the two sides interleaved (their order alternating) in each of
# R rounds; medians over the rounds, the machine's bandwidth probed each round.
#   (a) shared: every request a 1,536-token shared system prompt and a short
#       user turn, spread uniformly over the 8 adapters;
#   (b) turns:  multi-turn chat replays, each turn's prompt the last one, its
#       answer and a new user turn (text prompts, so the answer is re-read as
#       the server tokenises it);
#   (c) nohit:  random prompts and a cache_salt per request: nothing can hit,
#       so on/off is the cost of hashing and lookups.
# Each round uses its own seed (a new shared prefix, new turns) and resets
# the on side's cache first (POST /admin/prefix_cache/reset), so no round
# hits what an earlier one left. Usage:
#   bench/prefix_cache_bench.sh [--rounds R] [--requests N] [--conversations C] [--turns T]
#       [--nohit-requests N] [--prefix-len L] [--user-len L] [--max-tokens M] [--concurrency K]
# Defaults: 3 rounds; (a) 24 requests, prefix 1536, user turn 32, 16 new tokens; (b) 8 conversations
# of 4 turns, 64-word user turns, 32 new tokens; (c) 16 requests of 512 tokens; 2 client threads
# (few enough that a hit's TTFT is mostly its own short prefill, not a miss's queue). About 80k prompt
# tokens a round, both sides: 3 rounds take ~5 minutes at 1,000 prefill tokens/s (2 idle cores); one
# round with caching off on both sides took 7 minutes on 2 cores shared with builds (~270 tokens/s).
# A smoke run: --rounds 1 --requests 8 --conversations 2 --turns 2 --nohit-requests 4 --prefix-len 256
# Needs ./build/cli/loragate (or LORAGATE_BIN); writes its model and adapters under /tmp/lgb.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 requests=24 conversations=8 turns=4 nohit_requests=16
prefix_len=1536 user_len=32 max_tokens=16 concurrency=2
turn_words=64 turn_tokens=32 nohit_len=512 kv_mib=640
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2 ;;
    --requests) requests=$2 ;;
    --conversations) conversations=$2 ;;
    --turns) turns=$2 ;;
    --nohit-requests) nohit_requests=$2 ;;
    --prefix-len) prefix_len=$2 ;;
    --user-len) user_len=$2 ;;
    --max-tokens) max_tokens=$2 ;;
    --concurrency) concurrency=$2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
bin=$(realpath "${LORAGATE_BIN:-./build/cli/loragate}")
model=/tmp/lgb/m110
adapters=/tmp/lgb/serve-gap-adapters  # bench serve-gap's (and bench lora's) naming: r16-all-<i>
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
export LORAGATE_ADMIN_TOKEN=bench

mkdir -p /tmp/lgb
[ -f $model/config.json ] || "$bin" synth-model --out $model --preset 110m --seed 1 > /dev/null
missing=0
for i in 0 1 2 3 4 5 6 7; do [ -f $adapters/r16-all-$i/adapter_model.safetensors ] || missing=1; done
if [ $missing = 1 ]; then  # serve-gap writes the adapters it lacks; the smallest run of it
  "$bin" bench serve-gap --model $model --adapters 8 --adapters-dir $adapters --requests 1 --prompt-len 4 \
    --new-tokens 2 --reps 1 --no-thread-usage > "$work/adapters.log" 2>&1 || { cat "$work/adapters.log"; exit 1; }
fi

# How this server turns the cache off: serve's flags, else the config key, else it cannot (both sides alike).
if "$bin" serve --help 2>&1 | grep -q -- '--no-prefix-caching'; then switch=flags; else switch=config; fi

# start_server SIDE (on|off): starts it, sets url_SIDE.
start_server() {
  local side=$1 key="" flag=""
  if [ $switch = flags ]; then
    [ "$side" = on ] && flag=--prefix-caching || flag=--no-prefix-caching
  elif [ $switch = config ]; then
    [ "$side" = on ] && key=", prefix_caching: true" || key=", prefix_caching: false"
  fi
  {
    echo "server: {host: 127.0.0.1, max_queued_requests: 1024}"
    echo "model: {path: $model, served_name: base, dtype: bf16}"
    echo "engine: {max_loras: 8, kv_cache_mib: $kv_mib, max_num_batched_tokens: 512$key}"
    echo "adapters:"
    echo "  registry: $work/registry-$side.db"
    echo "  roots: [$adapters]"
    echo "  preload:"
    for i in 0 1 2 3 4 5 6 7; do echo "    - {name: t$i, path: $adapters/r16-all-$i}"; done
    echo "demo: {dir: $work/demo-$side}"
  } > "$work/$side.yaml"
  "$bin" serve --config "$work/$side.yaml" --port 0 $flag > "$work/server-$side.log" 2>&1 &
  local pid=$! url=""
  pids+=("$pid")
  for _ in $(seq 1 1200); do
    url=$(grep -o 'on http://[0-9.:]*' "$work/server-$side.log" | head -1 | cut -c4- || true)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$url" ] && [ $switch = config ] && grep -q prefix_caching "$work/server-$side.log"; then
    switch=none  # a server from before issue 23: it knows no such key
    start_server "$side"
    return
  fi
  [ -n "$url" ] || { echo "the $side server did not start:"; cat "$work/server-$side.log"; exit 1; }
  printf -v "url_$side" '%s' "$url"
}
start_server on
start_server off
if [ $switch = none ]; then
  echo "WARNING: this loragate has neither --no-prefix-caching nor engine.prefix_caching: both servers run" \
       "its default, so the on/off ratios compare a server with itself"
fi

reset_cache() {  # the on side forgets every cached prefix; a server without the route answers 404
  curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $LORAGATE_ADMIN_TOKEN" \
    "$1/admin/prefix_cache/reset" || true
}

# run_load WORKLOAD SIDE ROUND SEED: one bench serve; appends its figures to $work/results.
run_load() {
  local workload=$1 side=$2 round=$3 seed=$4 url args
  [ "$side" = on ] && url=$url_on || url=$url_off
  case "$workload" in
    shared) args=(--requests "$requests" --prompt-len "$user_len" --shared-prefix-len "$prefix_len"
                  --max-tokens "$max_tokens" --token-ids --vocab 32000) ;;
    turns)  args=(--requests "$conversations" --turns "$turns" --prompt-len $turn_words --max-tokens $turn_tokens) ;;
    nohit)  args=(--requests "$nohit_requests" --prompt-len $nohit_len --max-tokens "$max_tokens" --token-ids
                  --vocab 32000 --cache-salt-per-request) ;;
  esac
  [ "$side" = on ] && reset_cache "$url" > "$work/reset-code"
  "$bin" bench serve --url "$url" --adapters 8 --zipf 0 --concurrency "$concurrency" --seed "$seed" "${args[@]}" \
    --result-json "$work/r.json" > "$work/load.log" 2>&1 || { echo "bench serve failed ($workload, $side):"; cat "$work/load.log"; exit 1; }
  python3 - "$work/r.json" "$workload" "$side" "$round" >> "$work/results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(*sys.argv[2:5], r["request_throughput"], r["output_throughput"], r["total_token_throughput"],
      r["ttft_ms"]["median"], r["ttft_ms"]["p99"], r["ttft_hits_ms"]["median"], r["ttft_hits_ms"]["p99"],
      r["ttft_misses_ms"]["median"], r["ttft_misses_ms"]["p99"], r["hit_rate"], r["hit_requests"],
      r["miss_requests"], r["completed"], r["failed"], r["input_tokens"])
PY
  tail -1 "$work/results"
}

echo "prefix caching bench: $rounds rounds; (a) $requests requests, prefix $prefix_len + user $user_len tokens," \
     "$max_tokens new; (b) $conversations conversations x $turns turns of $turn_words words, $turn_tokens new;" \
     "(c) $nohit_requests requests of $nohit_len tokens, a salt each; 8 adapters, $concurrency client threads;" \
     "switch: $switch; uptime: $(uptime)"
# Both servers once through every adapter (slots, first-touch pages), with nothing left to hit.
for url in "$url_on" "$url_off"; do
  "$bin" bench serve --url "$url" --requests 8 --adapters 8 --zipf 0 --prompt-len 64 --max-tokens 4 --token-ids \
    --vocab 32000 --cache-salt-per-request --seed 1 > "$work/warmup.log" 2>&1 || { cat "$work/warmup.log"; exit 1; }
done
echo "workload side round req/s out_tok/s tok/s ttft_p50 ttft_p99 hit_p50 hit_p99 miss_p50 miss_p99 hit_rate hits misses done failed prompt_tokens"
for round in $(seq 1 "$rounds"); do
  "$bin" bench machine --reps 3 | tee -a "$work/machine"
  [ $((round % 2)) = 1 ] && order="on off" || order="off on"
  for workload in shared turns nohit; do
    for side in $order; do run_load $workload $side "$round" $((1000 * round + 7)); done
  done
done
reset_code=$(cat "$work/reset-code")
metrics() { curl -s "$1/metrics" | grep -E '^vllm:prefix_cache_(queries|hits)' | tr '\n' ' ' || true; }
echo "server counters: on: $(metrics "$url_on")| off: $(metrics "$url_off")| (none: a server without them)"

python3 - "$work/results" "$work/machine" "$reset_code" "$switch" "$prefix_len" <<'PY'
import re, statistics, sys
cols = ["req_s", "out_tps", "tps", "ttft_p50", "ttft_p99", "hit_p50", "hit_p99", "miss_p50", "miss_p99",
        "hit_rate", "hits", "misses", "done", "failed", "prompt_tokens"]
runs = {}
for line in open(sys.argv[1]):
    w, side, _round, *v = line.split()
    runs.setdefault((w, side), []).append(dict(zip(cols, map(float, v))))
med = {k: {c: statistics.median(r[c] for r in rs) for c in cols} for k, rs in runs.items()}
total = {k: {c: sum(r[c] for r in rs) for c in ("done", "failed", "hits", "misses")} for k, rs in runs.items()}
triad = [float(m) for m in re.findall(r"triad ([0-9.]+) GB/s", open(sys.argv[2]).read())]
fma = [float(m) for m in re.findall(r"FMA ([0-9.]+) GFLOP/s", open(sys.argv[2]).read())]
rounds = len(triad)
print(f"\nmachine, probed before each of {rounds} rounds: triad median {statistics.median(triad):.1f} GB/s "
      f"(min {min(triad):.1f}, max {max(triad):.1f}), peak f32 FMA median {statistics.median(fma):.1f} GFLOP/s")
if sys.argv[4] == "none":
    print("WARNING: no way to turn prefix caching off on this server: both sides ran the same configuration")
if sys.argv[3] not in ("200", "204"):
    print(f"note: POST /admin/prefix_cache/reset answered {sys.argv[3]}: rounds are kept apart by their seeds only")
names = {"shared": f"(a) shared {int(sys.argv[5]):,}-token prefix", "turns": "(b) multi-turn replay", "nohit": "(c) no hits, a salt each"}
print("\nmedians over rounds (TTFT in ms; hits: requests with cached_tokens > 0)\n")
print("| workload | caching | TTFT p50 hits | TTFT p50 misses | TTFT p50 all | TTFT p99 all | output tok/s | req/s "
      "| hit rate | hit / miss requests | completed / failed |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
def ms(x, n):  # a TTFT split with no request in it prints as a dash
    return f"{x:.0f}" if n > 0 else "-"
for w in ("shared", "turns", "nohit"):
    for side in ("on", "off"):
        if (w, side) not in med: continue
        m, t = med[(w, side)], total[(w, side)]
        print(f"| {names[w]} | {side} | {ms(m['hit_p50'], t['hits'])} | {ms(m['miss_p50'], t['misses'])} "
              f"| {m['ttft_p50']:.0f} | {m['ttft_p99']:.0f} | {m['out_tps']:.1f} | {m['req_s']:.2f} "
              f"| {100 * m['hit_rate']:.1f}% | {t['hits']:.0f} / {t['misses']:.0f} | {t['done']:.0f} / {t['failed']:.0f} |")
print("\nratios, on / off (medians of the per-round ratios, each round's two sides run back to back)")
def ratio(w, f):
    pairs = zip(runs[(w, "on")], runs[(w, "off")])
    vals = [a[f] / b[f] for a, b in pairs if b[f] > 0]
    return statistics.median(vals) if vals else float("nan")
def ttft_gain(w):  # off's TTFT (all misses) over on's TTFT on hits, per round
    vals = [b["ttft_p50"] / a["hit_p50"] for a, b in zip(runs[(w, "on")], runs[(w, "off")])
            if a["hits"] > 0 and a["hit_p50"] > 0]
    return f"{statistics.median(vals):.1f}x lower" if vals else "- (no hits)"
for w in ("shared", "turns"):
    print(f"  {names[w]}: TTFT p50 off / on-hits {ttft_gain(w)}; TTFT p50 all {ratio(w, 'ttft_p50'):.2f}; "
          f"output tok/s {ratio(w, 'out_tps'):.2f}; req/s {ratio(w, 'req_s'):.2f}")
cost = 1 - ratio("nohit", "tps")
print(f"  {names['nohit']}: total tok/s {ratio('nohit', 'tps'):.3f} (hashing cost {100 * cost:+.1f}% of throughput; "
      f"target <= 2%), req/s {ratio('nohit', 'req_s'):.3f}, TTFT p50 {ratio('nohit', 'ttft_p50'):.2f}")
PY
