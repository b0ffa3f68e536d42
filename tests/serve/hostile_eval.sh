#!/usr/bin/env bash
# Evaluation inputs are hostile inputs (issue 20, point 11): a real
# `loragate serve` probed with the admin token as an attacker would. Every
# probe must be refused quickly, without blocking a thread, growing memory or
# quoting a byte of a file; evaluations beyond evaluation.max_running wait
# "queued" up to a cap and then get 409; unknown shadow scenarios are refused.
# Afterwards the server still answers /health and stops promptly on SIGTERM.
# Usage: hostile_eval.sh path/to/loragate path/to/shared
set -euo pipefail
bin=$(realpath "$1")
S=$(realpath -m "${LORAGATE_SHARED_DIR:-$2}")  # the environment wins, as in the C++ tests
source "$(dirname "$0")/require_shared.sh"
require_shared "hostile eval" "$S/eval/bases/candidate-good/model.safetensors"
source "$(dirname "$0")/serve_helpers.sh"

roots=$work/roots
mkdir -p "$roots" "$work/outside"
cat > "$work/config.yaml" <<YAML
model: {path: $S/models/stories260K, served_name: online}
adapters: {roots: [$S/eval/adapters], registry: $work/registry.db}
bases: {roots: [$S/eval/bases]}
evaluation: {roots: [$roots]}
engine: {max_loras: 4, kv_cache_mib: 64}
server: {io_threads: 2, shutdown_deadline_ms: 2000}
YAML
# A value only the server's environment holds: /proc/self/environ must never show it.
LG_HOSTILE_CANARY=canary-4f1e9b start_server --config "$work/config.yaml" --admin-token s3cret
auth='Authorization: Bearer s3cret'

admin() {  # admin METHOD PATH [BODY]: sets $code and $body; never waits more than 10 s
  local data=()
  [ $# -ge 3 ] && data=(-d "$3")
  code=$(curl -s -o "$work/body" -w '%{http_code}' --max-time 10 -X "$1" -H "$auth" \
    -H 'Content-Type: application/json' "${data[@]}" "$url$2") || code="no answer in 10 s"
  body=$(cat "$work/body" 2>/dev/null || true)
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
now_ms() { date +%s%3N; }

# --- the scenario mia on both bases, as an operator sets it up.
admin POST /admin/bases '{"name": "candidate-good", "path": "'"$S/eval/bases/candidate-good"'"}'
[ "$code" = 202 ] || fail "base add: $code $body"
for _ in $(seq 1 300); do
  admin GET /admin/bases
  grep -Eq '"name":"candidate-good"[^}]*"state":"candidate"|"state":"candidate"[^}]*"name":"candidate-good"' <<<"$body" && break
  sleep 0.1
done
grep -q '"state":"candidate"' <<<"$body" || fail "candidate-good did not load: $body"
for base in online candidate-good; do
  extra=""
  [ "$base" = online ] || extra=', "base": "candidate-good"'
  admin POST /admin/adapters '{"name": "mia", "path": "'"$S/eval/adapters/$base/mia"'"'"$extra"'}'
  [ "$code" = 201 ] || fail "adapter add on $base: $code $body"
  admin PUT /admin/scenarios/mia '{"adapter": "mia"'"$extra"'}'
  [ "$code" = 200 ] || fail "scenario set on $base: $code $body"
done

# --- probes: each suite lies inside evaluation.roots; what it names is the attack.
printf 'TOPSECRET-7d2c\n' > "$work/outside/secret.jsonl"
ln -s "$work/outside/secret.jsonl" "$roots/link.jsonl"
mkfifo "$roots/items.fifo"
truncate -s 65M "$roots/big.jsonl"  # sparse: over the 64 MiB cap by its size alone
refused() {  # refused NAME EVAL_PATH WHAT...: a suite naming EVAL_PATH is refused in under 3 s, quoting nothing
  local name=$1 eval_path=$2
  shift 2
  printf 'scenarios:\n  mia: {eval: %s}\n' "$eval_path" > "$roots/$name.yaml"
  local t0 rss0
  t0=$(now_ms)
  rss0=$(rss_kb)
  admin POST /admin/evaluations '{"candidate": "candidate-good", "suite": "'"$roots/$name.yaml"'"}'
  local took=$(($(now_ms) - t0)) grown=$(($(rss_kb) - rss0))
  [ "$code" = 400 ] || fail "$name: want 400, got $code $body"
  [ "$took" -lt 3000 ] || fail "$name: refused after $took ms"
  [ "$grown" -lt 102400 ] || fail "$name: the server grew by $grown kB"
  for what in "$@"; do grep -q -- "$what" <<<"$body" || fail "$name: the answer must say '$what': $body"; done
  for secret in TOPSECRET canary-4f1e9b 'root:' 'last read' '\$6\$'; do
    grep -q -- "$secret" <<<"$body" && fail "$name: the answer quotes a file ($secret): $body"
  done
  echo "refused $name in $took ms: $body"
}
outside='does not exist or is outside every configured evaluation root'
refused dev-zero /dev/zero "$outside"
refused fifo items.fifo "is not a regular file"
refused fifo-again "$roots/items.fifo" "is not a regular file"  # two used to stall every off-strand admin route
refused shadow /etc/shadow "$outside"
refused environ /proc/self/environ "$outside"
refused secret "$work/outside/secret.jsonl" "$outside"
refused link link.jsonl "$outside"
refused dotdot ../outside/secret.jsonl "$outside"
refused big big.jsonl "over the limit of 67108864 bytes"
refused dir . "is a directory"

# Too many scenarios: refused at once, before any route is looked up or file read.
{ echo "scenarios:"; for i in $(seq 1 10000); do echo "  s$i: {eval: items.fifo}"; done; } > "$roots/many.yaml"
t0=$(now_ms)
admin POST /admin/evaluations '{"candidate": "candidate-good", "suite": "'"$roots/many.yaml"'"}'
took=$(($(now_ms) - t0))
[ "$code" = 400 ] && grep -q "10000 scenarios, over the limit of 64" <<<"$body" || fail "10000 scenarios: $code $body"
[ "$took" -lt 3000 ] || fail "10000 scenarios refused after $took ms"
# Routes are checked before any file is read: an unrouted scenario naming a FIFO is refused for its route.
printf 'scenarios:\n  mia: {eval: items.fifo}\n  ghost: {eval: items.fifo}\n' > "$roots/ghost.yaml"
admin POST /admin/evaluations '{"candidate": "candidate-good", "suite": "'"$roots/ghost.yaml"'"}'
grep -q "suite scenario 'ghost'" <<<"$body" || fail "an unrouted scenario must be refused first: $code $body"
# The gates file is read the same way.
for i in 1 2; do
  cp "$S/eval/scenarios/mia/eval.jsonl" "$roots/mia.jsonl"
  printf 'scenarios:\n  mia: {eval: mia.jsonl}\n' > "$roots/ok.yaml"
  admin POST /admin/evaluations '{"candidate": "candidate-good", "suite": "'"$roots/ok.yaml"'", "gates": "'"$roots/items.fifo"'"}'
  [ "$code" = 400 ] && grep -q "is not a regular file" <<<"$body" || fail "gates FIFO $i: $code $body"
done
curl -sf --max-time 5 "$url/health" > /dev/null || fail "/health after the probes"

# --- shadow traffic names scenarios that exist.
admin POST /admin/bases/candidate-good/shadow '{"fraction": 0.1, "scenarios": ["mia", "nope"]}'
[ "$code" = 404 ] && grep -q "scenario 'nope' does not exist" <<<"$body" || fail "shadow of nope: $code $body"
admin POST /admin/bases/candidate-good/shadow '{"fraction": 0.1, "scenarios": ["mia"]}'
[ "$code" = 200 ] || fail "shadow of mia: $code $body"
admin POST /admin/bases/candidate-good/shadow '{"fraction": 0}'
[ "$code" = 200 ] || fail "shadow off: $code $body"

# --- evaluation.max_running (1): one runs, 16 wait queued, the next is refused.
python3 - "$S/eval/scenarios/mia/eval.jsonl" "$roots/long.jsonl" <<'EOF'
import json, sys
items = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[2], "w") as out:
    for r in range(50):
        for it in items:
            out.write(json.dumps(dict(it, id="%s-r%d" % (it["id"], r))) + "\n")
EOF
printf 'scenarios:\n  mia: {eval: long.jsonl, max_tokens: 200}\n' > "$roots/long.yaml"
for i in $(seq 1 17); do
  admin POST /admin/evaluations '{"candidate": "candidate-good", "suite": "'"$roots/long.yaml"'"}'
  [ "$code" = 202 ] || fail "evaluation $i of 17: $code $body"
done
admin POST /admin/evaluations '{"candidate": "candidate-good", "suite": "'"$roots/long.yaml"'"}'
[ "$code" = 409 ] && grep -q "too many evaluations queued" <<<"$body" || fail "the 18th: want 409, got $code $body"
admin GET /admin/evaluations
running=$(grep -o '"state":"running"' <<<"$body" | wc -l)
queued=$(grep -o '"state":"queued"' <<<"$body" | wc -l)
[ "$running" = 1 ] && [ "$queued" = 16 ] || fail "want 1 running and 16 queued, got $running and $queued: $body"
curl -sf --max-time 5 "$url/health" > /dev/null || fail "/health while evaluations run"

# --- SIGTERM: prompt (2 s deadline), every evaluation stored cancelled.
t0=$(now_ms)
kill -TERM "$pid"
for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
took=$(($(now_ms) - t0))
kill -0 "$pid" 2>/dev/null && fail "still running $took ms after SIGTERM"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
[ "$took" -lt 6000 ] || fail "SIGTERM took $took ms with shutdown_deadline_ms 2000"
start_server --config "$work/config.yaml" --admin-token s3cret
admin GET /admin/evaluations
[ "$(grep -o '"verdict":"cancelled"' <<<"$body" | wc -l)" = 17 ] || fail "want 17 cancelled runs stored: $body"
kill -TERM "$pid"
wait "$pid" || true
echo "hostile eval: all checks passed (SIGTERM in $took ms)"
