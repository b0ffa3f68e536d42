#!/usr/bin/env bash
# EMFILE: `loragate serve` with a small descriptor limit, flooded with idle
# connections until accept(2) fails. It must back off (no hot loop, no log
# flood) and serve again once the connections close. Usage:
#   emfile.sh path/to/loragate path/to/shared
set -euo pipefail
bin=$(realpath "$1")
S=$(realpath -m "${LORAGATE_SHARED_DIR:-$2}")  # the environment wins, as in the C++ tests
source "$(dirname "$0")/require_shared.sh"
require_shared emfile "$S/models/stories260K/model.safetensors"
source "$(dirname "$0")/serve_helpers.sh"
# The limit applies to the server alone, not to this script's connections.
serve_fd_limit=96 start_server --model "$S/models/stories260K" --registry "$work/registry.db" --config /dev/null
hostport=${url#http://}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

fds=()
for _ in $(seq 1 160); do
  exec {fd}<>"/dev/tcp/${hostport%:*}/${hostport#*:}" || break
  fds+=("$fd")
done
sleep 0.3
grep -q "accept failed" "$work/server.log" || fail "the descriptor limit was never reached (${#fds[@]} connections)"
before=$(cpu_ticks)
lines_before=$(grep -c "accept failed" "$work/server.log")
sleep 3
ticks=$(( $(cpu_ticks) - before ))
lines=$(( $(grep -c "accept failed" "$work/server.log") - lines_before ))
hz=$(getconf CLK_TCK)
echo "out of descriptors for 3 s: $ticks CPU ticks (of $((3 * hz)) in 3 s), $lines log lines"
[ "$ticks" -lt "$hz" ] || fail "accept spins: $ticks CPU ticks in 3 s"
[ "$lines" -le 10 ] || fail "log flood: $lines lines in 3 s"
for fd in "${fds[@]}"; do exec {fd}>&-; done
for _ in $(seq 1 50); do
  curl -sf "$url/health" > /dev/null && { echo "emfile: all checks passed"; exit 0; }
  sleep 0.1
done
fail "the server did not recover once descriptors were free"
