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
#       [--workloads shared,turns,nohit]
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
turn_words=64 turn_tokens=32 nohit_len=512 kv_mib=640 workloads=shared,turns,nohit
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
    --workloads) workloads=$2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }
  shift 2
done
for w in ${workloads//,/ }; do
  case "$w" in shared|turns|nohit) ;; *) echo "--workloads: unknown workload $w (shared, turns, nohit)" >&2; exit 2 ;; esac
done
bin=$(realpath "${LORAGATE_BIN:-./build/cli/loragate}")
model=/tmp/lgb/m110
adapters=/tmp/lgb/serve-gap-adapters  # bench serve-gap's (and bench lora's) naming: r16-all-<i>
work=$(mktemp -d)
mkdir "$work/runs"
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

# run_load WORKLOAD SIDE ROUND SEED: one bench serve; its JSON goes to $work/runs, a line of figures to stdout.
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
  local json="$work/runs/$workload-$side-$round.json"
  "$bin" bench serve --url "$url" --adapters 8 --zipf 0 --concurrency "$concurrency" --seed "$seed" "${args[@]}" \
    --result-json "$json" > "$work/load.log" 2>&1 || { echo "bench serve failed ($workload, $side):"; cat "$work/load.log"; exit 1; }
  python3 - "$json" "$workload" "$side" "$round" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(*sys.argv[2:5], f"{r['request_throughput']:.2f} {r['output_throughput']:.1f} {r['total_token_throughput']:.1f}",
      f"{r['ttft_ms']['median']:.0f} {r['ttft_hits_ms']['median']:.0f} {r['ttft_misses_ms']['median']:.0f}",
      f"{100 * r['hit_rate']:.1f}% {r['hit_requests']} {r['miss_requests']} {r['completed']} {r['failed']}")
PY
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
echo "workload side round req/s out_tok/s tok/s ttft_p50 hit_p50 miss_p50 (ms) hit_rate hits misses done failed"
for round in $(seq 1 "$rounds"); do
  "$bin" bench machine --reps 3 | tee -a "$work/machine"
  [ $((round % 2)) = 1 ] && order="on off" || order="off on"
  for workload in ${workloads//,/ }; do
    for side in $order; do run_load $workload $side "$round" $((1000 * round + 7)); done
  done
done
reset_code=$(cat "$work/reset-code" 2>/dev/null || echo "never called")
metrics() { curl -s "$1/metrics" | grep -E '^vllm:prefix_cache_(queries|hits)' | tr '\n' ' ' || true; }
counters_on=$(metrics "$url_on") counters_off=$(metrics "$url_off")
echo "server counters (tokens): on: ${counters_on:-none} | off: ${counters_off:-none}"

python3 - "$work/runs" "$work/machine" "$reset_code" "$switch" "$prefix_len" "$turns" <<'PY'
import glob, json, os, re, statistics, sys
runs = {}  # (workload, side) -> [the result JSON of each round, in round order]
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")), key=lambda p: int(p.rsplit("-", 1)[1][:-5])):
    w, side, _ = os.path.basename(path).split("-")
    runs.setdefault((w, side), []).append(json.load(open(path)))
def med(w, side, f):
    return statistics.median(f(r) for r in runs[(w, side)])
def total(w, side, key):
    return sum(r[key] for r in runs[(w, side)])
text = open(sys.argv[2]).read()
triad = [float(m) for m in re.findall(r"triad ([0-9.]+) GB/s", text)]
fma = [float(m) for m in re.findall(r"FMA ([0-9.]+) GFLOP/s", text)]
print(f"\nmachine, probed before each of {len(triad)} rounds: triad median {statistics.median(triad):.1f} GB/s "
      f"(min {min(triad):.1f}, max {max(triad):.1f}), peak f32 FMA median {statistics.median(fma):.1f} GFLOP/s")
if sys.argv[4] == "none":
    print("WARNING: no way to turn prefix caching off on this server: both sides ran the same configuration")
if sys.argv[3] not in ("200", "204"):
    print(f"note: POST /admin/prefix_cache/reset answered {sys.argv[3]}: rounds are kept apart by their seeds only")
names = {"shared": f"(a) shared {int(sys.argv[5]):,}-token prefix", "turns": f"(b) {sys.argv[6]}-turn replays",
         "nohit": "(c) no hits, a salt each"}
print("\nmedians over rounds (TTFT in ms; a hit is a request with cached_tokens > 0)\n")
print("| workload | caching | TTFT p50 hits | TTFT p50 misses | TTFT p50 all | TTFT p99 all | output tok/s | req/s "
      "| hit rate | hit / miss requests | completed / failed |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for w in ("shared", "turns", "nohit"):
    for side in ("on", "off"):
        if (w, side) not in runs: continue
        hits, misses = total(w, side, "hit_requests"), total(w, side, "miss_requests")
        split = lambda key, n: f"{med(w, side, lambda r: r[key]['median']):.0f}" if n else "-"
        print(f"| {names[w]} | {side} | {split('ttft_hits_ms', hits)} | {split('ttft_misses_ms', misses)} "
              f"| {med(w, side, lambda r: r['ttft_ms']['median']):.0f} | {med(w, side, lambda r: r['ttft_ms']['p99']):.0f} "
              f"| {med(w, side, lambda r: r['output_throughput']):.1f} | {med(w, side, lambda r: r['request_throughput']):.2f} "
              f"| {100 * med(w, side, lambda r: r['hit_rate']):.1f}% | {hits} / {misses} "
              f"| {total(w, side, 'completed')} / {total(w, side, 'failed')} |")

# The same seed gives both sides the same requests (adapter, prompt, and with greedy
# decoding the same answers, so the same later turns): request i on one side is request i on the other.
def paired_hits(w):  # per round: (on's TTFT p50 over its hits, off's TTFT p50 over the same requests)
    out = []
    for on, off in zip(runs[(w, "on")], runs[(w, "off")]):
        pairs = [(a["ttft_ms"], b["ttft_ms"]) for a, b in zip(on["per_request"], off["per_request"])
                 if a["ok"] and b["ok"] and a["cached_tokens"] > 0]
        if pairs:
            out.append((statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs), len(pairs)))
    return out
def ratio(w, f):  # median over rounds of on / off
    vals = [f(a) / f(b) for a, b in zip(runs[(w, "on")], runs[(w, "off")]) if f(b) > 0]
    return statistics.median(vals) if vals else float("nan")
print("\non / off, medians of the per-round figures (each round runs the two sides back to back)")
for w in ("shared", "turns"):
    if (w, "on") not in runs: continue
    p = paired_hits(w)
    if p:
        on_ms, off_ms = statistics.median(x[0] for x in p), statistics.median(x[1] for x in p)
        gain = statistics.median(x[1] / x[0] for x in p if x[0] > 0)
        hits = f"the on side's hits (TTFT p50 {on_ms:.0f} ms, {sum(x[2] for x in p)} requests) were {gain:.1f}x faster " \
               f"to first token than the same requests off ({off_ms:.0f} ms)"
    else:
        hits = "no hits on the on side"
    print(f"  {names[w]}: {hits}; TTFT p50 all {ratio(w, lambda r: r['ttft_ms']['median']):.2f}; "
          f"output tok/s {ratio(w, lambda r: r['output_throughput']):.2f}; req/s {ratio(w, lambda r: r['request_throughput']):.2f}")
if ("nohit", "on") in runs:
    tps = ratio("nohit", lambda r: r["total_token_throughput"])
    print(f"  {names['nohit']}: total tok/s {tps:.3f} (the cost of hashing and lookups: {100 * (1 - tps):+.1f}% of "
        f"throughput; target <= 2%), req/s {ratio('nohit', lambda r: r['request_throughput']):.3f}, "
        f"TTFT p50 {ratio('nohit', lambda r: r['ttft_ms']['median']):.2f}")
PY
