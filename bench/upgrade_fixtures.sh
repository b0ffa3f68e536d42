#!/usr/bin/env bash
# The staged upgrade on ../shared/eval, timed (issue 33): for each repetition,
# a fresh server (own registry and training dir) serving stories260K with the
# three scenarios' online adapters trained by `loragate train` (default
# recipe, trained once and reused), then one upgrade:
#   candidate-good with --strategy retrain-all, candidate-good with
#   transfer-first, and candidate-bad (rejected at the base stage),
# interleaved, printing each upgrade's wall time and stages, then medians.
#
#   bash bench/upgrade_fixtures.sh [REPS]     (default 3; port 8790)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
S=$(realpath ../shared)
L=$PWD/build/cli/loragate
work=$(mktemp -d /tmp/lg-bench-upgrade.XXXXXX)
trap 'pkill -f "serve --config $work/" 2>/dev/null || true; rm -rf "$work"' EXIT
export LORAGATE_ADMIN_TOKEN=bench LORAGATE_URL=http://127.0.0.1:8790
for s in mia cat sunny; do
  "$L" train --base "$S/models/stories260K" --data "$S/eval/scenarios/$s/train.jsonl" --out "$work/online/$s" > /dev/null 2>&1
done
declare -A times
run() {  # name strategy candidate
  local d=$work/$rep-$1-$2 t0 t1
  mkdir -p "$d"
  cat > "$d/serve.yaml" <<YAML
model: {path: $S/models/stories260K, served_name: online}
adapters: {roots: [$work/online], registry: $d/registry.db}
bases: {roots: [$S/eval/bases]}
training: {roots: [$S/eval/scenarios], dir: $d/trained}
evaluation: {roots: [$PWD/configs, $S/eval], suite: $PWD/configs/eval-suite.yaml}
server: {port: 8790}
YAML
  "$L" serve --config "$d/serve.yaml" > "$d/serve.log" 2>&1 &
  local server=$!
  for s in mia cat sunny; do
    "$L" adapter add "$s" "$work/online/$s" > /dev/null
    "$L" scenario set "$s" "$s" --train "$S/eval/scenarios/$s/train.jsonl" > /dev/null
  done
  t0=$(date +%s.%N)
  "$L" upgrade --candidate "$3" --path "$S/eval/bases/$3" --strategy "$2" > "$d/upgrade.txt" 2>&1 || true
  t1=$(date +%s.%N)
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  local s
  s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
  times[$1-$2]+="$s "
  printf '%-26s %7.1f s  %s\n' "$1 $2" "$s" "$(grep -E '^(verdict|failed):' "$d/upgrade.txt" | head -1)"
  grep -E 'stage [a-z]+ +(done|failed|skipped)' "$d/upgrade.txt" | sed 's/^/    /'
}
for rep in $(seq 1 "$reps"); do
  echo "--- repetition $rep"
  run good retrain-all candidate-good
  run good transfer-first candidate-good
  run bad transfer-first candidate-bad
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "--- medians over $reps"
for k in good-retrain-all good-transfer-first bad-transfer-first; do
  printf '%-26s %7.1f s\n' "$k" "$(echo "${times[$k]}" | median)"
done
ra=$(echo "${times[good-retrain-all]}" | median); tf=$(echo "${times[good-transfer-first]}" | median)
bad=$(echo "${times[bad-transfer-first]}" | median)
awk -v ra="$ra" -v tf="$tf" -v bad="$bad" 'BEGIN {
  printf "transfer-first speed-up on candidate-good: %.2fx\n", ra / tf
  printf "candidate-bad rejected in %.1f%% of retrain-all'"'"'s time\n", 100 * bad / ra }'
