#!/usr/bin/env bash
# The README's curl examples against `loragate serve` on its embedded demo, as
# a user runs them (only the port differs: an ephemeral one). Usage:
#   curl_quickstart.sh path/to/loragate
set -euo pipefail
bin=$1
source "$(dirname "$0")/serve_helpers.sh"

cat > "$work/config.yaml" <<YAML
demo: {dir: $work/demo}
adapters: {registry: $work/registry.db}
YAML
export LORAGATE_ADMIN_TOKEN=s3cret
start_server --config "$work/config.yaml"
echo "server at $url"

# The README's examples.
curl -sf "$url/v1/models" > "$work/models.json" || fail "GET /v1/models"
grep -q '"id":"support-bot"' "$work/models.json" || fail "support-bot not listed: $(cat "$work/models.json")"
grep -q '"parent":"loragate-demo"' "$work/models.json" || fail "adapters must name their parent base"

curl -sf "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "support-bot", "prompt": "Once upon a time", "max_tokens": 16}' > "$work/c1.json" || fail "completion"
# Sampled (temperature 1): the random demo weights may draw EOS before 16 tokens.
grep -Eq '"completion_tokens":([1-9]|1[0-6])[,}]' "$work/c1.json" || fail "completion usage: $(cat "$work/c1.json")"
grep -q '"system_fingerprint":"loragate-demo-' "$work/c1.json" || fail "system_fingerprint: $(cat "$work/c1.json")"

curl -sf "$url/v1/completions" -H 'Content-Type: application/json' -H 'X-Scenario: legal' \
  -d '{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}' > "$work/c2.json" || fail "scenario completion"
grep -q '"text_completion"' "$work/c2.json" || fail "scenario completion: $(cat "$work/c2.json")"

curl -sfN "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "poetry", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "stream": true}' \
  > "$work/chat.sse" || fail "streaming chat"
grep -q '^data: \[DONE\]' "$work/chat.sse" || fail "stream did not end with [DONE]"
[ "$(grep -c '^data: {' "$work/chat.sse")" -ge 2 ] || fail "too few stream chunks"

# Admin: register, list, route a scenario, unregister.
auth='Authorization: Bearer s3cret'
curl -sf "$url/admin/adapters" -H "$auth" -H 'Content-Type: application/json' \
  -d "{\"name\": \"poetry-2\", \"path\": \"$work/demo/adapters/poetry\"}" > "$work/add.json" || fail "admin add"
"$bin" adapter ls --url "$url" --token s3cret > "$work/ls.txt" || fail "adapter ls"
grep -q '^poetry-2 ' "$work/ls.txt" || fail "adapter ls: $(cat "$work/ls.txt")"
"$bin" scenario set verses poetry-2 --url "$url" --token s3cret > /dev/null || fail "scenario set"
curl -sf "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"scenario": "verses", "prompt": "Hi", "max_tokens": 4}' > /dev/null || fail "completion by body scenario"
status=$(curl -s -o /dev/null -w '%{http_code}' "$url/admin/adapters" -H 'Authorization: Bearer wrong')
[ "$status" = 401 ] || fail "wrong token gave $status"
# (Output goes to files before grep -q: with pipefail, grep quitting early
# would fail the pipeline through the writer's SIGPIPE.)
curl -sf "$url/metrics" > "$work/metrics.txt" || fail "GET /metrics"
grep -q '^loragate_requests_total{base="loragate-demo",adapter="support-bot",status="200"} 1' "$work/metrics.txt" || fail "metrics"
grep -q '^vllm:lora_adapter_loaded{adapter_name="support-bot",base="loragate-demo"} 1$' "$work/metrics.txt" ||
  fail "support-bot served but not reported loaded"
grep -q '^vllm:lora_max_adapters{base="loragate-demo"} 4$' "$work/metrics.txt" || fail "vllm:lora_max_adapters"


kill -TERM "$pid"
wait "$pid" && code=0 || code=$?
[ "$code" = 0 ] || fail "SIGTERM exit code $code"
echo "curl quickstart: all checks passed"
