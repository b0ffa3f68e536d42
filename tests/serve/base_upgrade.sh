#!/usr/bin/env bash
# The README's base-upgrade walk-through against a real `loragate serve`, with
# the fixtures of ../shared/eval (only the port and the registry file differ):
# load a candidate, register its retrained adapters, evaluate, promote, roll back.
# Usage: base_upgrade.sh path/to/loragate path/to/shared
set -euo pipefail
bin=$(realpath "$1")
S=$(realpath -m "${LORAGATE_SHARED_DIR:-$2}")  # the environment wins, as in the C++ tests
source "$(dirname "$0")/require_shared.sh"
require_shared "base upgrade" "$S/eval/bases/candidate-good/model.safetensors"
cd "$(dirname "$0")/../.."  # the repository root: the README's commands run from there
source "$(dirname "$0")/serve_helpers.sh"
export LORAGATE_ADMIN_TOKEN=s3cret

start_server --model "$S/models/stories260K" --served-name online \
  --adapter-root "$S/eval/adapters" --base-root "$S/eval/bases" --eval-root "$(pwd)/configs" --eval-root "$S/eval" \
  --registry "$work/registry.db"
export LORAGATE_URL=$url
lg() { "$bin" "$@" 2>&1; }
fingerprint() {
  curl -sf "$url/v1/completions" -H 'Content-Type: application/json' -H 'X-Scenario: mia' \
    -d '{"prompt": "Once upon a time there was a little girl named", "max_tokens": 8, "temperature": 0}' |
    grep -o '"system_fingerprint":"[^"]*"' | cut -d'"' -f4
}

for s in mia cat sunny; do
  lg adapter add $s "$S/eval/adapters/online/$s" > "$work/out" || fail "adapter add: $(cat "$work/out")"
  lg scenario set $s $s > "$work/out" || fail "scenario set: $(cat "$work/out")"
done
lg base add candidate-good "$S/eval/bases/candidate-good" > "$work/out" || fail "base add: $(cat "$work/out")"
grep -q "base 'candidate-good' candidate" "$work/out" || fail "base add: $(cat "$work/out")"
if lg base promote candidate-good > "$work/out"; then fail "promote must be refused: $(cat "$work/out")"; fi
grep -q "409" "$work/out" && grep -q "adapter 'mia'" "$work/out" || fail "refusal must name mia: $(cat "$work/out")"
[[ $(fingerprint) == online-* ]] || fail "online must still serve"
for s in mia cat sunny; do
  lg adapter add $s "$S/eval/adapters/candidate-good/$s" --base candidate-good > "$work/out" || fail "adapter add --base: $(cat "$work/out")"
  lg scenario set $s $s --base candidate-good > "$work/out" || fail "scenario set --base: $(cat "$work/out")"
done
if lg base promote candidate-good > "$work/out"; then fail "promote needs an evaluation: $(cat "$work/out")"; fi
grep -q "no passing evaluation" "$work/out" || fail "refusal must ask for an evaluation: $(cat "$work/out")"
lg eval run --url "$url" --candidate candidate-good --suite configs/eval-suite.yaml > "$work/out" || fail "eval run: $(cat "$work/out")"
grep -q "verdict: pass" "$work/out" || fail "eval: $(cat "$work/out")"
lg base promote candidate-good > "$work/out" || fail "promote: $(cat "$work/out")"
grep -q "promote: 'online' -> 'candidate-good'" "$work/out" || fail "promote: $(cat "$work/out")"
[[ $(fingerprint) == candidate-good-* ]] || fail "candidate-good must serve after promote"
lg base ls > "$work/out" || fail "base ls: $(cat "$work/out")"
grep -Eq '^candidate-good +serving' "$work/out" && grep -Eq '^online +previous' "$work/out" || fail "base ls: $(cat "$work/out")"
lg base rollback > "$work/out" || fail "rollback: $(cat "$work/out")"
[[ $(fingerprint) == online-* ]] || fail "online must serve after rollback"
lg base rm candidate-good > "$work/out" || fail "base rm: $(cat "$work/out")"
lg base ls --json > "$work/out" || fail "base ls --json"
grep -q '"name": "candidate-good"' "$work/out" && fail "candidate-good must be gone: $(cat "$work/out")"
echo "base upgrade: all checks passed"
