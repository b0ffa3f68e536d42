#!/usr/bin/env bash
# scripts/fleet.sh end to end: two replicas of the built binary serving the
# built-in demo behind HAProxy, with the private PostgreSQL cluster started.
#   fleet_up_test.sh path/to/loragate SOURCE_DIR
# Registry: the fleet's PostgreSQL cluster (the replicas are fleet replicas).
# Checks: up prints every URL; the proxy answers /v1/models and
# completions; one adapter's requests all land on one replica (consistent
# hashing), X-Scenario routes too; kill -9 of that replica takes it out of the
# proxy within 2 s while requests keep succeeding; restart-replica brings it
# back; down stops everything (twice: idempotent).
set -euo pipefail
bin=$1
src=$2
source "$(dirname "$0")/require_tool.sh"
require_tool fleet_up haproxy curl '/usr/lib/postgresql/*/bin/initdb'

work=$(mktemp -d)
dir=$work/fleet
fleet() { bash "$src/scripts/fleet.sh" "$@"; }
trap 'fleet down --dir "$dir" > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
fail() {
  echo "fleet_up: FAIL: $*"
  for f in "$dir"/replica-*.log "$dir"/haproxy.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  exit 1
}
ms_now() { date +%s%3N; }

# P..P+4 free: the proxy, 2 replicas, PostgreSQL, HAProxy's stats. Below
# the kernel's ephemeral range (32768 up, ip_local_port_range), where a
# client connection's own port could take one of them between the check and
# the bind.
free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2> /dev/null; }
port=
low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2> /dev/null || echo 32768)
for _ in $(seq 1 50); do
  p=$((20000 + RANDOM % (low - 20010)))
  free "$p" && free $((p + 1)) && free $((p + 2)) && free $((p + 3)) && free $((p + 4)) && { port=$p; break; }
done
[ -n "$port" ] || fail "no five free ports in a row"
proxy=http://127.0.0.1:$port
stats="http://127.0.0.1:$((port + 4))/;csv"

cat > "$work/config.yaml" << YAML
demo: {dir: $work/demo}
YAML
export LORAGATE_ADMIN_TOKEN=s3cret LORAGATE_BIN=$bin
chmod 711 "$work"  # PostgreSQL runs as user postgres when this runs as root
fleet up --replicas 2 --port "$port" --dir "$dir" -- --config "$work/config.yaml" > "$work/up.txt" 2>&1 ||
  { cat "$work/up.txt"; fail "fleet up"; }
cat "$work/up.txt"
grep -q "^proxy: $proxy$" "$work/up.txt" || fail "up did not print the proxy URL"
for i in 1 2; do grep -q "^replica-$i: http://127.0.0.1:$((port + i))$" "$work/up.txt" || fail "replica $i URL"; done
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
PGPASSWORD=$(cat "$dir/pg/password") "$pg_bin/psql" -h 127.0.0.1 -p $((port + 3)) -U loragate -d loragate \
  -tAc 'SELECT 1' > "$work/psql.txt" 2>&1 || fail "the PostgreSQL cluster: $(cat "$work/psql.txt")"
# The database password is on no command line and in no log (libpq reads it from a password file).
pw=$(cat "$dir/pg/password")
for pid in $(cat "$dir"/replica-*.pid); do
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "$pw" && fail "replica $pid has the password on its command line"
done
grep -lF "$pw" "$dir"/replica-*.log "$work/up.txt" && fail "a log prints the database password"
grep -q "registry postgresql://127.0.0.1:$((port + 3))/loragate" "$dir/replica-1.log" ||
  fail "the replica's banner does not name its registry: $(head -5 "$dir/replica-1.log")"

# Through the proxy.
curl -sf "$proxy/v1/models" > "$work/models.json" || fail "GET /v1/models through the proxy"
grep -q '"id":"support-bot"' "$work/models.json" || fail "support-bot not listed: $(cat "$work/models.json")"
complete() {  # model [header] -> HTTP status
  curl -s -o "$work/c.json" -w '%{http_code}' --max-time 20 "$proxy/v1/completions" \
    -H 'Content-Type: application/json' ${2:+-H "$2"} \
    -d "{\"model\": \"$1\", \"prompt\": \"Once upon a time\", \"max_tokens\": 4}" || true
}
for _ in 1 2 3 4 5 6; do
  [ "$(complete support-bot)" = 200 ] || fail "completion through the proxy: $(cat "$work/c.json")"
  [ "$(complete "" 'X-Scenario: legal')" = 200 ] || fail "X-Scenario completion: $(cat "$work/c.json")"
done

# Affinity: each adapter's six requests on one replica, per the replicas' own metrics.
count() {  # replica adapter -> requests it served
  curl -sf "http://127.0.0.1:$((port + $1))/metrics" > "$work/m.txt" || { echo 0; return; }
  awk -v key="loragate_requests_total{base=\"loragate-demo\",adapter=\"$2\",status=\"200\"}" \
    '$1 == key {s += $2} END {print s + 0}' "$work/m.txt"
}
home=
for adapter in support-bot legal-summary; do
  a=$(count 1 "$adapter") b=$(count 2 "$adapter")
  { [ "$a" = 6 ] && [ "$b" = 0 ]; } || { [ "$a" = 0 ] && [ "$b" = 6 ]; } ||
    fail "$adapter's requests split across replicas ($a on 1, $b on 2): no affinity"
  [ "$adapter" = support-bot ] && { [ "$a" = 6 ] && home=1 || home=2; }
done
echo "support-bot lives on replica $home"
curl -sf "http://127.0.0.1:$((port + home))/metrics" > "$work/m.txt"
grep -q '^vllm:lora_adapter_loaded{adapter_name="support-bot",base="loragate-demo"} 1' "$work/m.txt" ||
  fail "replica $home does not report support-bot loaded"

# kill -9 its replica: out of the proxy within 2 s, requests keep succeeding.
fleet status --dir "$dir" > "$work/status.txt" || fail "status"
grep -q "^replica-$home: .* running (pid [0-9]*), ready" "$work/status.txt" || fail "status: $(cat "$work/status.txt")"
kill -9 "$(cat "$dir/replica-$home.pid")"
t0=$(ms_now)
out=
while [ $(($(ms_now) - t0)) -lt 3000 ]; do
  status=$(complete support-bot)
  [ "$status" = 200 ] || fail "a completion failed ($status) after the kill: $(cat "$work/c.json")"
  if [ -z "$out" ] && curl -sf "$stats" | grep -q "^by_adapter,replica-$home,.*,DOWN,"; then
    out=$(($(ms_now) - t0))
  fi
done
[ -n "$out" ] || fail "replica $home still in the proxy 3 s after kill -9"
[ "$out" -le 2000 ] || fail "replica $home left the proxy after $out ms (> 2000)"
echo "replica $home out of the proxy $out ms after kill -9; completions kept succeeding"

fleet restart-replica --dir "$dir" --index "$home" > "$work/restart.txt" 2>&1 ||
  fail "restart-replica: $(cat "$work/restart.txt")"
for _ in $(seq 1 50); do
  curl -sf "$stats" | grep -q "^by_adapter,replica-$home,.*,UP," && break
  sleep 0.1
done
curl -sf "$stats" | grep -q "^by_adapter,replica-$home,.*,UP," || fail "replica $home not back in the proxy"
[ "$(complete support-bot)" = 200 ] || fail "completion after the restart"

pids=$(cat "$dir"/replica-*.pid "$dir/haproxy.pid")
fleet down --dir "$dir" > /dev/null || fail "down"
for pid in $pids; do kill -0 "$pid" 2> /dev/null && fail "pid $pid still running after down"; done
"$pg_bin/pg_isready" -q -h 127.0.0.1 -p $((port + 3)) && fail "PostgreSQL still running after down"
curl -s -o /dev/null --max-time 2 "$proxy/ready" && fail "the proxy still answers after down"
fleet down --dir "$dir" > /dev/null || fail "down a second time"
echo "fleet_up: all checks passed"
