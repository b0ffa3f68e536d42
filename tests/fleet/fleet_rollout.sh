#!/usr/bin/env bash
# A 3-replica fleet (scripts/fleet.sh: PostgreSQL, HAProxy, the replicas) on
# loopback, exercised through its proxy (issue 22, point 6):
#   1. an adapter and a scenario registered through the proxy are served by
#      every replica; a candidate base added through it loads on every one;
#   2. a rolling promote of candidate-good under continuous load (half of it
#      streaming) fails no request, every answer is the greedy text of the
#      base it names, and every replica ends on the candidate;
#   3. a promote whose post-swap check fails (a scenario whose adapter file is
#      broken on the replicas that did not validate it) rolls the fleet back;
#   4. kill -9 of one replica under load: the proxy routes around it (only
#      requests in flight on it may fail), and it rejoins on the fleet's base;
#   5. PostgreSQL stopped for 5 s: serving continues, an admin write answers
#      503 meanwhile and succeeds once it is back.
# Usage: fleet_rollout.sh LORAGATE_BINARY. Needs ../shared, postgresql and
# haproxy (skips saying so outside CI).
set -euo pipefail
bin=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
shared=$(cd "$root/../shared" 2>/dev/null && pwd || true)
skip() { if [ "${CI:-}" = true ]; then echo "FAIL: $* (CI must run this)"; exit 1; fi; echo "SKIPPED: $*"; exit 0; }
[ -n "$shared" ] && [ -f "$shared/eval/bases/candidate-good/model.safetensors" ] || skip "../shared/eval is absent"
command -v haproxy >/dev/null || skip "haproxy is not installed (scripts/setup.sh)"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || skip "postgresql is not installed (scripts/setup.sh)"

work=$(mktemp -d)
[ "$(id -u)" -ne 0 ] || chmod o+x "$work"
fleet_dir=$work/fleet
export LORAGATE_BIN=$bin LORAGATE_ADMIN_TOKEN=fleet-test-token
cleanup() { bash "$root/scripts/fleet.sh" down --dir "$fleet_dir" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$fleet_dir"/replica-*.log; do echo "--- $f"; tail -n 30 "$f"; done
  exit 1
}
auth=(-H "Authorization: Bearer $LORAGATE_ADMIN_TOKEN")
admin() { curl -s --max-time 120 "${auth[@]}" -H 'Content-Type: application/json' "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# A free base port with room for the replicas, PostgreSQL and HAProxy's stats.
port=$((20000 + RANDOM % 12000))  # below the ephemeral ports (scripts/fleet.sh)
mkdir -p "$work/adapters"
cp -r "$shared/eval/adapters/candidate-good/mia" "$work/adapters/broken"
bash "$root/scripts/fleet.sh" up --replicas 3 --port "$port" --dir "$fleet_dir" -- \
  --model "$shared/models/stories260K" --served-name online \
  --adapter-root "$shared/eval/adapters" --adapter-root "$work/adapters" \
  --base-root "$shared/eval/bases" --eval-root "$shared/eval" > "$work/up.log" 2>&1 || { cat "$work/up.log"; fail "fleet did not come up"; }
proxy=http://127.0.0.1:$port
replicas=("http://127.0.0.1:$((port + 1))" "http://127.0.0.1:$((port + 2))" "http://127.0.0.1:$((port + 3))")

# --- 1. registrations through the proxy reach every replica
admin "$proxy/admin/adapters" -d "{\"name\": \"mia\", \"path\": \"$shared/eval/adapters/online/mia\"}" | grep -q '"sha256"' \
  || fail "registering mia through the proxy"
admin -X PUT "$proxy/admin/scenarios/mia" -d '{"adapter": "mia"}' | grep -q '"adapter":"mia"' || fail "scenario mia"
admin "$proxy/admin/bases" -d "{\"name\": \"candidate-good\", \"path\": \"$shared/eval/bases/candidate-good\"}" >/dev/null
for _ in $(seq 1 300); do
  loaded=$(admin "$proxy/admin/fleet" | json "sum(1 for r in d['replicas'] for b in r['bases'] if b['name']=='candidate-good' and b['state']=='candidate')")
  [ "$loaded" = 3 ] && break
  sleep 0.2
done
[ "$loaded" = 3 ] || fail "candidate-good is loaded on $loaded of 3 replicas"
admin "$proxy/admin/adapters" -d "{\"name\": \"mia\", \"base\": \"candidate-good\", \"path\": \"$shared/eval/adapters/candidate-good/mia\"}" \
  | grep -q '"sha256"' || fail "registering mia on candidate-good"
admin -X PUT "$proxy/admin/scenarios/mia" -d '{"adapter": "mia", "base": "candidate-good"}' >/dev/null
sleep 1.5  # every replica reconciles on the notification
body='{"prompt": "One day", "max_tokens": 12, "temperature": 0}'
expected=$work/expected.json
python3 - "$expected" "${replicas[@]}" <<'PY'
import json, os, sys, urllib.request
out, urls = sys.argv[1], sys.argv[2:]
texts = {}
for base in ("online", "candidate-good"):
    seen = set()
    for u in urls:  # every replica answers the scenario, and all alike
        req = urllib.request.Request(u + "/v1/completions",
                                     json.dumps({"prompt": "One day", "max_tokens": 12, "temperature": 0}).encode(),
                                     {"Content-Type": "application/json", "X-Scenario": "mia", "X-Base": base,
                                      "Authorization": "Bearer " + os.environ["LORAGATE_ADMIN_TOKEN"]})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.headers["X-Base"] == base, (u, base, r.headers["X-Base"])
            seen.add(json.loads(r.read())["choices"][0]["text"])
    assert len(seen) == 1, (base, seen)
    texts[base] = seen.pop()
assert texts["online"] != texts["candidate-good"], texts
json.dump(texts, open(out, "w"))
PY
[ -s "$expected" ] || fail "expected texts"
echo "fleet: 3 replicas serve mia on both bases"

# --- 2. a rolling promote under load
start_load() {
  rm -f "$work/stop"
  FLEET_LOAD_SCENARIO=mia FLEET_LOAD_PROMPT="One day" python3 "$here/fleet_load.py" "$proxy" "$expected" "$work/load-$1.json" "$work/stop" --workers 4 \
    > "$work/load-$1.log" 2>&1 &
  load_pid=$!
}
stop_load() { touch "$work/stop"; wait "$load_pid" || true; cat "$work/load-$1.log"; }
load_field() { json "d['$2']" < "$work/load-$1.json"; }

start_load promote
sleep 2
t0=$(date +%s.%N)
promoted=$(admin -X POST "$proxy/admin/bases/candidate-good/promote" -d '{"force": true}')
t1=$(date +%s.%N)
echo "$promoted" | grep -q '"state":"done"' || { stop_load promote; fail "promote: $promoted"; }
sleep 2
stop_load promote
echo "fleet: rollout took $(python3 -c "print(round($t1 - $t0, 2))") s"
[ "$(load_field promote failed)" = 0 ] || fail "requests failed during the rollout: $(cat "$work/load-promote.json")"
[ "$(load_field promote wrong)" = 0 ] || fail "answers differ from their base's greedy text: $(cat "$work/load-promote.json")"
json "d['by_base'].get('online', 0) > 0 and d['by_base'].get('candidate-good', 0) > 0" < "$work/load-promote.json" \
  | grep -q True || fail "the load did not see both bases: $(cat "$work/load-promote.json")"
serving=$(admin "$proxy/admin/fleet" | json "' '.join(sorted(r['serving'] for r in d['replicas']))")
[ "$serving" = "candidate-good candidate-good candidate-good" ] || fail "replicas serve: $serving"

# --- 3. a failing post-swap check rolls the fleet back
admin -X POST "$proxy/admin/bases/rollback" -d '{}' | grep -q '"to":"online"' || fail "fleet rollback"
for _ in $(seq 1 50); do
  serving=$(admin "$proxy/admin/fleet" | json "' '.join(sorted(r['serving'] for r in d['replicas']))")
  [ "$serving" = "online online online" ] && break
  sleep 0.1
done
[ "$serving" = "online online online" ] || fail "after rollback replicas serve: $serving"
admin "$proxy/admin/adapters" -d "{\"name\": \"broken\", \"base\": \"candidate-good\", \"path\": \"$work/adapters/broken\"}" \
  | grep -q '"sha256"' || fail "registering broken"
admin -X PUT "$proxy/admin/scenarios/fragile" -d '{"adapter": "mia"}' >/dev/null
admin -X PUT "$proxy/admin/scenarios/fragile" -d '{"adapter": "broken", "base": "candidate-good"}' >/dev/null
sleep 1.5
# Only the replica that validated it holds it in memory; the others read the file at first use.
head -c 100 "$shared/eval/adapters/candidate-good/mia/adapter_model.safetensors" > "$work/adapters/broken/adapter_model.safetensors"
refused=$(admin -w '\n%{http_code}' -X POST "$proxy/admin/bases/candidate-good/promote" -d '{"force": true}')
echo "$refused" | tail -1 | grep -q '^4' || fail "a promote with a failing check answered: $refused"
echo "$refused" | grep -q 'rolled back' || fail "the refusal does not say it rolled back: $refused"
sleep 1.5
fleet=$(admin "$proxy/admin/fleet")
serving=$(echo "$fleet" | json "' '.join(sorted(r['serving'] for r in d['replicas']))")
[ "$serving" = "online online online" ] || fail "after a failed check replicas serve: $serving"
echo "$fleet" | json "d['rollouts'][0]['state']" | grep -q rolled_back || fail "rollout record: $fleet"
echo "fleet: a failed check rolled back: $(echo "$fleet" | json "d['rollouts'][0]['error']" | cut -c1-160)"

# --- 4. kill -9 of one replica under load
start_load kill
sleep 1
kill -9 "$(cat "$fleet_dir/replica-2.pid")"
sleep 4
stop_load kill
[ "$(load_field kill failed)" -le 4 ] || fail "more failures than requests in flight on the killed replica: $(cat "$work/load-kill.json")"
[ "$(load_field kill wrong)" = 0 ] || fail "wrong answers around the kill: $(cat "$work/load-kill.json")"
[ "$(load_field kill ok)" -gt 0 ] || fail "nothing was served around the kill"
admin "$proxy/admin/fleet" | json "[r['state'] for r in d['replicas'] if r['url'].endswith(':$((port + 2))')][0]" | grep -q lost \
  || fail "the killed replica is not shown lost"
bash "$root/scripts/fleet.sh" restart-replica --dir "$fleet_dir" --index 2 > "$work/restart.log" 2>&1 || fail "restart: $(cat "$work/restart.log")"
got=$(curl -s -D - -o /dev/null "${replicas[1]}/v1/completions" -H 'Content-Type: application/json' -H 'X-Scenario: mia' -d "$body" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-base"{print $2}')
[ "$got" = online ] || fail "the restarted replica serves '$got', not the fleet's base"

# --- 5. PostgreSQL stopped for 5 s
bash "$root/scripts/fleet.sh" pg-stop --dir "$fleet_dir" >/dev/null 2>&1 || fail "stopping PostgreSQL"
code=$(curl -s -o /dev/null -w '%{http_code}' "$proxy/v1/completions" -H 'Content-Type: application/json' -H 'X-Scenario: mia' -d "$body")
[ "$code" = 200 ] || fail "serving stopped with the registry: $code"
code=$(admin -o /dev/null -w '%{http_code}' -X PUT "$proxy/admin/scenarios/later" -d '{"adapter": "mia"}')
[ "$code" = 503 ] || fail "an admin write with the registry down answered $code, not 503"
sleep 5
bash "$root/scripts/fleet.sh" pg-start --dir "$fleet_dir" >/dev/null 2>&1 || fail "starting PostgreSQL"
for _ in $(seq 1 50); do
  code=$(admin -o /dev/null -w '%{http_code}' -X PUT "$proxy/admin/scenarios/later" -d '{"adapter": "mia"}')
  [ "$code" = 200 ] && break
  sleep 0.2
done
[ "$code" = 200 ] || fail "the admin write did not succeed once PostgreSQL was back: $code"
admin "$proxy/admin/scenarios/fragile" | grep -q fragile || fail "a scenario was lost across the outage"
echo "PASS: fleet rollout, failed-check rollback, kill -9 and registry outage"
