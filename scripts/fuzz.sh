#!/usr/bin/env bash
# The fuzz job (issue 9): builds the libFuzzer targets of tests/fuzz with
# clang (ASan + UBSan, UB aborts) in build-fuzz/, gathers seed corpora, runs
# every target for a while and prints what each did. FUZZING.md describes
# the targets.
#
#   bash scripts/fuzz.sh [seconds_per_target]      (default 60)
#
# The evaluator's targets (eval_suite eval_items generic_items gates) and the
# grammar front ends' (gbnf regex_grammar json_schema) and the tool-call
# scanner's (tool_calls) run at most FUZZ_SHORT_S seconds
# each (default 25): small parsers that saturate quickly, kept short so the
# CI job stays within its budget.
#
# Environment:
#   FUZZ_TARGETS   targets to run, space-separated (default: all)
#   FUZZ_PARALLEL  targets run at once (default 2); each uses one core
#   FUZZ_TIMEOUT   seconds one input may take before it counts as a hang (10)
#   FUZZ_RSS_MB    memory limit per target in MiB (2048)
#   LORAGATE_JOBS  build jobs (2)
#   FUZZ_BUILD_DIR the build directory (build-fuzz)
#   FUZZ_SHORT_S   the most seconds each evaluator or grammar target runs (25)
#
# Fails (exit 1) when any target crashes, leaks, hangs or runs out of
# memory; the input that did it is kept under build-fuzz/fuzz-work/artifacts/.
# Corpora grow in build-fuzz/fuzz-work/corpus/ and are reused by later runs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
dir=${FUZZ_BUILD_DIR:-build-fuzz}
work=$dir/fuzz-work
jobs=${LORAGATE_JOBS:-2}
parallel=${FUZZ_PARALLEL:-2}
hang_s=${FUZZ_TIMEOUT:-10}
rss_mb=${FUZZ_RSS_MB:-2048}
short_targets="eval_suite eval_items generic_items gates gbnf regex_grammar tool_calls json_schema"
all_targets="http openai_request safetensors tokenizer_json tokenizer_encode peft_config serve_config jinja sse $short_targets"
short_s=${FUZZ_SHORT_S:-25}
targets=${FUZZ_TARGETS:-$all_targets}
start=$SECONDS
step() { echo "fuzz: $* ($((SECONDS - start)) s elapsed)"; }

# --- packages: the project's, then clang with libFuzzer's runtime and lld.
bash scripts/setup.sh clang libclang-rt-14-dev lld

# --- configure (once) and build the fuzz targets only.
if [ ! -f "$dir/CMakeCache.txt" ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # -O1 with asserts on (no NDEBUG) and line tables for the sanitizers' stacks.
  CC=clang CXX=clang++ cmake -S . -B "$dir" "${generator[@]}" -DLORAGATE_FUZZ=ON -DLORAGATE_BUILD_TESTS=OFF \
    -DLORAGATE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only"
fi
step "configured $dir"
build_targets=()
for t in $targets; do build_targets+=("fuzz_$t"); done
cmake --build "$dir" -j "$jobs" --target "${build_targets[@]}"
step "built ${build_targets[*]}"

# --- seed corpora: the committed seeds, then inputs from ../shared and configs/.
seeds=tests/fuzz/seeds
shared=${LORAGATE_SHARED:-../shared}
for t in $targets; do
  mkdir -p "$work/corpus/$t" "$work/artifacts/$t"
  cp -f "$seeds/$t"/* "$work/corpus/$t/" 2>/dev/null || true
done
add_seed() {  # add_seed TARGET FILE [NAME]
  [ -d "$work/corpus/$1" ] && [ -f "$2" ] && cp -f "$2" "$work/corpus/$1/${3:-$(basename "$2")}" || true
}
for f in configs/*.yaml; do add_seed serve_config "$f"; done
add_seed eval_suite configs/eval-suite.yaml
add_seed gates configs/gates.yaml
if [ -d "$shared" ]; then
  add_seed tokenizer_json "$shared/models/stories260K/tokenizer.json" stories260K.json
  for d in "$shared"/models/stories260K "$shared"/tokenizers/*/; do
    # tokenizer_config.json files: chat templates (the jinja target reads a JSON object as one).
    add_seed jinja "$d/tokenizer_config.json" "$(basename "$d")_tokenizer_config.json"
  done
  # A few lines of each shared eval set and of the generic set: real items, small inputs.
  for f in "$shared"/eval/scenarios/*/eval.jsonl; do
    [ -d "$work/corpus/eval_items" ] && [ -f "$f" ] &&
      head -n 3 "$f" > "$work/corpus/eval_items/shared_$(basename "$(dirname "$f")")" || true
  done
  [ -d "$work/corpus/generic_items" ] && [ -f "$shared/eval/generic/heldout.jsonl" ] &&
    head -n 2 "$shared/eval/generic/heldout.jsonl" > "$work/corpus/generic_items/shared_heldout" || true
  n=0
  while IFS= read -r f; do
    n=$((n + 1))
    add_seed peft_config "$f" "shared_$n.json"
  done < <(find "$shared" -name adapter_config.json 2>/dev/null | sort)
  if command -v python3 >/dev/null; then
    # Golden texts and conversations: texts for the tokenizers, chat bodies for the request parser.
    python3 - "$shared" "$work/corpus" <<'EOF'
import json, os, sys
shared, corpus = sys.argv[1], sys.argv[2]
def put(target, name, data):
    if os.path.isdir(os.path.join(corpus, target)):
        with open(os.path.join(corpus, target, name), "wb") as f:
            f.write(data)
try:
    enc = json.load(open(os.path.join(shared, "tokenizers/golden_encodings.json")))
    for i, s in enumerate(enc.get("strings", [])):
        put("tokenizer_encode", "golden_%d" % i, bytes([i % 3 | (i & 0x30)]) + s["text"].encode())
except (OSError, ValueError, KeyError, TypeError):
    pass
try:
    chat = json.load(open(os.path.join(shared, "tokenizers/golden_chat.json")))
    for name, conv in chat.get("conversations", {}).items():
        msgs = conv.get("messages", conv) if isinstance(conv, dict) else conv
        extra = conv.get("extra", {}) if isinstance(conv, dict) else {}
        body = {"model": "stories", "messages": msgs, "chat_template_kwargs": extra}
        put("openai_request", "golden_" + name, json.dumps(body).encode())
        put("jinja", "golden_" + name, b"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}\0" +
            json.dumps(msgs).encode() + b"\0" + json.dumps(extra).encode())
except (OSError, ValueError, KeyError, TypeError, AttributeError):
    pass
EOF
  fi
  step "seeds: committed ones, configs/ and $shared"
else
  echo "fuzz: $shared is absent: skipping its seeds (committed seeds and configs/ only)"
fi

# --- run.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
command -v llvm-symbolizer >/dev/null || export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
dict_of() {
  case "$1" in
    http) echo tests/fuzz/dicts/http.dict ;;
    jinja) echo tests/fuzz/dicts/jinja.dict ;;
    serve_config) echo tests/fuzz/dicts/yaml.dict ;;
    sse) echo tests/fuzz/dicts/sse.dict ;;
    eval_suite | eval_items | generic_items | gates) echo tests/fuzz/dicts/eval.dict ;;
    tokenizer_encode) echo tests/fuzz/dicts/text.dict ;;
    gbnf | regex_grammar) echo tests/fuzz/dicts/grammar.dict ;;
    tool_calls) echo tests/fuzz/dicts/tool_calls.dict ;;
    *) echo tests/fuzz/dicts/json.dict ;;
  esac
}
run_target() {
  local t=$1
  local log=$work/logs/$t.log
  local rc=0 t_seconds=$seconds
  case " $short_targets " in *" $t "*) ((t_seconds > short_s)) && t_seconds=$short_s ;; esac
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$t_seconds" -timeout="$hang_s" -rss_limit_mb="$rss_mb" \
    -print_final_stats=1 -dict="$(dict_of "$t")" \
    -artifact_prefix="$work/artifacts/$t/" "$work/corpus/$t" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$work/logs/$t.rc"
}
mkdir -p "$work/logs"
step "running each of $targets for $seconds s (evaluator and grammar targets at most $short_s s), $parallel at a time"
running=0
for t in $targets; do
  run_target "$t" &
  running=$((running + 1))
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

# --- report.
failed=0
printf '%-18s %6s %12s %9s %7s %8s %8s  %s\n' target result executions exec/s cov ft corpus rss_mb
for t in $targets; do
  log=$work/logs/$t.log
  rc=$(cat "$work/logs/$t.rc" 2>/dev/null || echo 1)
  stat() { grep -o "stat::$1: *[0-9]*" "$log" | tail -1 | grep -o '[0-9]*$' || echo "?"; }
  # The last status line (#N ... cov: C ft: F corp: K/...) has the final coverage.
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  corp=$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  result=ok
  if [ "$rc" != 0 ]; then
    result=FAIL
    failed=1
  fi
  printf '%-18s %6s %12s %9s %7s %8s %8s  %s\n' "$t" "$result" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "$cov" "$ft" "$corp" "$(stat peak_rss_mb)"
done
for t in $targets; do
  rc=$(cat "$work/logs/$t.rc" 2>/dev/null || echo 1)
  [ "$rc" = 0 ] && continue
  echo
  echo "fuzz: $t failed (exit $rc); its log ($work/logs/$t.log) ends:"
  grep -E 'ERROR|SUMMARY|runtime error|Test unit written|timeout|out-of-memory' "$work/logs/$t.log" | head -20 || true
  tail -n 30 "$work/logs/$t.log"
done
step "done"
exit "$failed"
