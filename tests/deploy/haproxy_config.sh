#!/usr/bin/env bash
# deploy/haproxy/haproxy.cfg as scripts/fleet.sh fills it in, for 1 and 3
# replicas: `haproxy -c` accepts it without a warning, no placeholder is
# left, both backends list every replica with health checks, and the
# properties the fleet relies on are there (routing key from X-Scenario and
# the body's model, consistent hashing with a bounded load, /ready checks
# that drop a replica within 2 s, long timeouts for streams).
#   haproxy_config.sh SOURCE_DIR
set -euo pipefail
src=$1
source "$(dirname "$0")/require_tool.sh"
require_tool haproxy_config haproxy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "haproxy_config: FAIL: $*"; exit 1; }

for n in 1 3; do
  cfg=$work/haproxy-$n.cfg
  bash "$src/scripts/fleet.sh" haproxy-config --replicas "$n" --port 18000 > "$cfg"
  haproxy -c -f "$cfg" > "$work/check.log" 2>&1 ||
    { cat "$work/check.log"; fail "haproxy -c rejects the config for $n replicas"; }
  grep -qi 'warning' "$work/check.log" && { cat "$work/check.log"; fail "haproxy -c warns ($n replicas)"; }
  grep -q '@' <(grep -v '^ *#' "$cfg") && fail "a placeholder is left: $(grep -n '@' "$cfg" | grep -v '#')"
  [ "$(grep -c '^    server replica-[0-9]* 127.0.0.1:180[0-9][0-9] check$' "$cfg")" -eq $((2 * n)) ] ||
    fail "expected $n servers in each of the two backends"
  grep -q "^    server replica-$n 127.0.0.1:$((18000 + n)) check" "$cfg" || fail "replica $n not on port P+$n"
  grep -q "^    bind 127.0.0.1:18000$" "$cfg" || fail "the proxy must listen on P"
done
want() { grep -Eq "$1" "$cfg" || fail "missing: $2"; }
want "^ +option http-buffer-request" "body buffering (the model field)"
want "json_query\('\\\$\.model'\)" "routing key from the body's model"
want "req\.hdr\(X-Scenario\)" "routing key from X-Scenario"
want "^ +balance hash var\(txn\.route_key\)" "hash on the routing key"
want "^ +hash-type consistent" "consistent hashing"
want "^ +hash-balance-factor [0-9]+" "bounded load"
want "^ +option httpchk GET /ready" "health checks on /ready"
want "^ +use_backend by_adapter if \{ path_beg /v1/ \}" "/v1/* by adapter"
want "^ +default_backend any_replica" "other routes to any replica"
want "^ +timeout server 10m" "long server timeout (SSE)"
want "^ +retry-on conn-failure empty-response" "generation retried when a replica dies mid-request"
# Out within 2 s of not answering: inter + timeout + fastinter * (fall - 1) + timeout.
ms() { case $1 in *ms) echo "${1%ms}" ;; *s) echo $((${1%s} * 1000)) ;; esac; }
read -r -a ds <<< "$(grep -E '^ +default-server ' "$cfg")"
opt() { local i; for ((i = 0; i < ${#ds[@]}; i++)); do [ "${ds[i]}" = "$1" ] && echo "${ds[i + 1]}"; done; return 0; }
inter=$(ms "$(opt inter)") fast=$(ms "$(opt fastinter)") fall=$(opt fall)
check=$(ms "$(grep -E '^ +timeout check ' "$cfg" | awk '{print $3}')")
[ -n "$inter" ] && [ -n "$fast" ] && [ -n "$fall" ] && [ -n "$check" ] ||
  fail "default-server inter/fastinter/fall and timeout check are required"
worst=$((inter + check + (fast + check) * (fall - 1)))
[ "$worst" -le 2000 ] || fail "a hung replica stays in for up to $worst ms (> 2000)"
echo "haproxy_config: valid for 1 and 3 replicas; a hung replica is out within $worst ms"
