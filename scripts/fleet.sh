#!/usr/bin/env bash
# A loragate fleet on one machine (issue 22): a private PostgreSQL cluster
# for the shared registry, N replicas of `loragate serve`, and HAProxy in
# front of them (deploy/haproxy/haproxy.cfg), all under one directory.
#
#   scripts/fleet.sh up --replicas N --port P --dir D [-- loragate serve flags...]
#   scripts/fleet.sh down --dir D
#   scripts/fleet.sh status --dir D
#   scripts/fleet.sh restart-replica --dir D --index I
#   scripts/fleet.sh pg-stop --dir D    (stops the registry's PostgreSQL: the replicas keep serving)
#   scripts/fleet.sh pg-start --dir D   (starts it again)
#   scripts/fleet.sh haproxy-config --replicas N --port P   (prints the config up writes)
#
# Ports: HAProxy on P, replica I (1..N) on P+I, PostgreSQL on P+N+1 and
# HAProxy's statistics on P+N+2 (all on 127.0.0.1). Choose P below the
# kernel's ephemeral ports (32768 up on Linux): there a client connection can
# hold one of these ports the moment a server binds it. `up` returns once the
# proxy and every replica answer GET /ready, printing their URLs.
#
# Environment:
#   LORAGATE_BIN          the binary (default build/cli/loragate)
#   LORAGATE_ADMIN_TOKEN  passed through to the replicas (serve reads it)
#   FLEET_REGISTRY        the registry the replicas use instead of the private
#                         cluster's postgresql:// URL (e.g. a shared SQLite
#                         file); the cluster still starts unless
#   FLEET_POSTGRES=off    is set too
#   FLEET_READY_TIMEOUT   seconds `up` waits for /ready (default 120)
#   FLEET_STOP_GRACE      seconds between SIGTERM and SIGKILL on down (default 10)
#
# PostgreSQL refuses to run as root: as root, initdb and pg_ctl run as the
# `postgres` user of Debian's package (runuser), which owns D/pg. D itself is
# made traversable (o+x) for that user.
#
# Kept in D: fleet.env (ports, URLs), replica.args (the serve flags,
# NUL-separated, so restart-replica starts a replica exactly as up did),
# replica-I.log/.pid, haproxy.cfg/.log/.pid, pg/ (data, socket, log).
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin  # Debian installs haproxy there, outside a user's PATH

fleet_root=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "fleet: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2; }

# ---------------------------------------------------------------- helpers

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

read_pid() { [ -f "$1" ] && cat "$1" || true; }

http_ready() { curl -sf -o /dev/null --max-time 2 "$1/ready"; }

# Runs a PostgreSQL server program as the cluster's owner.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$d" ] && [ -x "$d/initdb" ] || die "PostgreSQL not found under /usr/lib/postgresql/*/bin (run scripts/setup.sh)"
  echo "$d"
}

# Stops pid in file $1 (SIGTERM, then SIGKILL after the grace) and removes the file.
stop_pidfile() {
  local file=$1 pid grace=${FLEET_STOP_GRACE:-10}
  pid=$(read_pid "$file")
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((grace * 10))); do
      pid_alive "$pid" || break
      sleep 0.1
    done
    if pid_alive "$pid"; then
      echo "fleet: pid $pid ($(basename "$file" .pid)) ignored SIGTERM for ${grace} s: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

log_tail() {
  echo "--- last lines of $1:" >&2
  tail -n 30 "$1" >&2 2>/dev/null || echo "(no log)" >&2
}

load_env() {
  [ -f "$dir/fleet.env" ] || die "no fleet in $dir (fleet.env missing)"
  # shellcheck disable=SC1091
  source "$dir/fleet.env"
}

# Starts replica $1 with the flags saved in replica.args, detached, pid in D.
start_replica() {
  local i=$1 port=$((FLEET_PORT + $1)) args=()
  [ -f "$dir/replica.args" ] && mapfile -d '' -t args < "$dir/replica.args"
  # setsid: the replica outlives this script and its terminal.
  PGPASSFILE=${FLEET_PGPASSFILE:-${PGPASSFILE:-}} \
    setsid "$FLEET_BIN" serve --host 127.0.0.1 --port "$port" --registry "$FLEET_REGISTRY_URL" "${args[@]}" \
    >> "$dir/replica-$i.log" 2>&1 < /dev/null &
  echo $! > "$dir/replica-$i.pid"
}

# Waits until $2 answers /ready; name $1, log $3, pid file $4. Fails with the log tail.
wait_ready() {
  local name=$1 url=$2 log=$3 pidfile=$4 deadline=$((SECONDS + ${FLEET_READY_TIMEOUT:-120}))
  until http_ready "$url"; do
    if [ -n "$pidfile" ] && ! pid_alive "$(read_pid "$pidfile")"; then
      echo "fleet: $name exited before it was ready ($url)" >&2
      log_tail "$log"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "fleet: $name did not answer GET $url/ready within ${FLEET_READY_TIMEOUT:-120} s" >&2
      log_tail "$log"
      return 1
    fi
    sleep 0.2
  done
}

# ---------------------------------------------------------------- postgres

pg_up() {
  local bindir pw
  bindir=$(pg_bindir)
  mkdir -p "$dir/pg"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres > /dev/null 2>&1 ||
      die "running as root needs the 'postgres' user (Debian's postgresql package creates it)"
    chmod o+x "$dir"
    chown postgres: "$dir/pg"
    runuser -u postgres -- test -x "$dir/pg" ||
      die "user postgres cannot reach $dir/pg: make the directories above it traversable (chmod o+x)" \
        "or choose another --dir"
  fi
  as_pg mkdir -p "$dir/pg/sock"
  if [ ! -f "$dir/pg/data/PG_VERSION" ]; then
    pw=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
    echo "$pw" > "$dir/pg/password"
    chmod 600 "$dir/pg/password"
    # A copy the owner can read, for initdb; removed right after.
    as_pg sh -c 'umask 077; cat > "$1"' _ "$dir/pg/sock/pwfile" < "$dir/pg/password"
    as_pg "$bindir/initdb" -D "$dir/pg/data" -U loragate --pwfile="$dir/pg/sock/pwfile" \
      --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 > "$dir/pg/initdb.log" 2>&1 ||
      { rm -f "$dir/pg/sock/pwfile"; log_tail "$dir/pg/initdb.log"; die "initdb failed"; }
    rm -f "$dir/pg/sock/pwfile"
  fi
  pw=$(cat "$dir/pg/password")
  as_pg "$bindir/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $FLEET_PG_PORT -k $dir/pg/sock" start > /dev/null ||
    { log_tail "$dir/pg/postgres.log"; die "PostgreSQL did not start"; }
  if ! PGPASSWORD=$pw "$bindir/psql" -h 127.0.0.1 -p "$FLEET_PG_PORT" -U loragate -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = 'loragate'" | grep -q 1; then
    PGPASSWORD=$pw "$bindir/createdb" -h 127.0.0.1 -p "$FLEET_PG_PORT" -U loragate loragate ||
      die "createdb loragate failed"
  fi
  # The password reaches the replicas through libpq's password file, never in
  # the URL: a URL is on every replica's command line (ps) and in its logs.
  (umask 077; printf '127.0.0.1:%s:loragate:loragate:%s\n' "$FLEET_PG_PORT" "$pw" > "$dir/pg/pgpass")
  FLEET_PGPASSFILE=$(cd "$dir/pg" && pwd)/pgpass
  FLEET_PG_URL="postgresql://loragate@127.0.0.1:$FLEET_PG_PORT/loragate"
}

pg_down() {
  [ -f "$dir/pg/data/postmaster.pid" ] || return 0
  as_pg "$(pg_bindir)/pg_ctl" -D "$dir/pg/data" -m fast -w stop > /dev/null 2>&1 || true
}

# ---------------------------------------------------------------- haproxy

haproxy_config() {
  local servers="" i
  for i in $(seq 1 "$FLEET_REPLICAS"); do
    servers+="    server replica-$i 127.0.0.1:$((FLEET_PORT + i)) check"$'\n'
  done
  servers=${servers%$'\n'}
  awk -v servers="$servers" -v bind="127.0.0.1:$FLEET_PORT" -v stats="127.0.0.1:$FLEET_STATS_PORT" '
    $1 == "@SERVERS@" { print servers; next }
    { gsub(/@BIND@/, bind); gsub(/@STATS_BIND@/, stats); print }
  ' "$fleet_root/deploy/haproxy/haproxy.cfg"
}

haproxy_up() {
  command -v haproxy > /dev/null || die "haproxy not found (run scripts/setup.sh)"
  haproxy_config > "$dir/haproxy.cfg"
  haproxy -c -q -f "$dir/haproxy.cfg" || die "generated $dir/haproxy.cfg is invalid (haproxy -c)"
  setsid haproxy -db -f "$dir/haproxy.cfg" > "$dir/haproxy.log" 2>&1 < /dev/null &
  echo $! > "$dir/haproxy.pid"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  local replicas="" port="" i
  while [ $# -gt 0 ]; do
    case $1 in
      --replicas) replicas=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      --dir) dir=$2; shift 2 ;;
      --) shift; break ;;
      *) die "up: unknown argument '$1' (serve flags go after --)" ;;
    esac
  done
  [[ $replicas =~ ^[1-9][0-9]*$ ]] || die "up: --replicas N (N >= 1) is required"
  [[ $port =~ ^[1-9][0-9]*$ ]] || die "up: --port P is required"
  [ $((port + replicas + 2)) -le 65535 ] || die "up: ports P..P+N+2 must be below 65536"
  [ -n "${dir:-}" ] || die "up: --dir D is required"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/fleet.env" ]; then
    load_env
    for f in "$dir"/replica-*.pid "$dir/haproxy.pid"; do
      pid_alive "$(read_pid "$f")" && die "a fleet is already running in $dir (scripts/fleet.sh down --dir $dir)"
    done
  fi

  FLEET_BIN=${LORAGATE_BIN:-$fleet_root/build/cli/loragate}
  [ -x "$FLEET_BIN" ] || die "loragate binary not found: $FLEET_BIN (build it, or set LORAGATE_BIN)"
  FLEET_BIN=$(cd "$(dirname "$FLEET_BIN")" && pwd)/$(basename "$FLEET_BIN")
  FLEET_REPLICAS=$replicas FLEET_PORT=$port
  FLEET_PG_PORT=$((port + replicas + 1)) FLEET_STATS_PORT=$((port + replicas + 2))
  local postgres=${FLEET_POSTGRES:-on}
  [ -n "${FLEET_REGISTRY:-}" ] || [ "$postgres" != off ] || die "FLEET_POSTGRES=off needs FLEET_REGISTRY"
  for p in "$port" $(seq $((port + 1)) $((port + replicas))) "$FLEET_STATS_PORT"; do
    port_in_use "$p" && die "port $p on 127.0.0.1 is in use (choose another --port)"
  done
  if [ "$postgres" != off ] && [ ! -f "$dir/pg/data/postmaster.pid" ] && port_in_use "$FLEET_PG_PORT"; then
    die "port $FLEET_PG_PORT (PostgreSQL: P+N+1) on 127.0.0.1 is in use (choose another --port)"
  fi

  printf '%s\0' "$@" > "$dir/replica.args"
  [ $# -gt 0 ] || : > "$dir/replica.args"
  FLEET_PG_URL="" FLEET_PGPASSFILE=""
  [ "$postgres" = off ] || pg_up
  FLEET_REGISTRY_URL=${FLEET_REGISTRY:-$FLEET_PG_URL}
  {
    printf 'FLEET_BIN=%q\nFLEET_REPLICAS=%q\nFLEET_PORT=%q\n' "$FLEET_BIN" "$FLEET_REPLICAS" "$FLEET_PORT"
    printf 'FLEET_PG_PORT=%q\nFLEET_STATS_PORT=%q\n' "$FLEET_PG_PORT" "$FLEET_STATS_PORT"
    printf 'FLEET_POSTGRES=%q\nFLEET_REGISTRY_URL=%q\n' "$postgres" "$FLEET_REGISTRY_URL"
    printf 'FLEET_PGPASSFILE=%q\n' "$FLEET_PGPASSFILE"
  } > "$dir/fleet.env"
  chmod 600 "$dir/fleet.env"  # a FLEET_REGISTRY given by the user may hold a password

  # Replica 1 first, alone: it creates the registry's tables (and the demo
  # model's files when serving the demo) that the others then open.
  start_replica 1
  wait_ready "replica 1" "http://127.0.0.1:$((port + 1))" "$dir/replica-1.log" "$dir/replica-1.pid" ||
    { cmd_down > /dev/null; exit 1; }
  for i in $(seq 2 "$replicas"); do start_replica "$i"; done
  for i in $(seq 2 "$replicas"); do
    wait_ready "replica $i" "http://127.0.0.1:$((port + i))" "$dir/replica-$i.log" "$dir/replica-$i.pid" ||
      { cmd_down > /dev/null; exit 1; }
  done
  haproxy_up
  wait_ready "haproxy" "http://127.0.0.1:$port" "$dir/haproxy.log" "$dir/haproxy.pid" ||
    { cmd_down > /dev/null; exit 1; }

  echo "proxy: http://127.0.0.1:$port"
  for i in $(seq 1 "$replicas"); do echo "replica-$i: http://127.0.0.1:$((port + i))"; done
  if [ "$postgres" != off ]; then
    echo "postgresql: 127.0.0.1:$FLEET_PG_PORT (password in $dir/pg/password)"
  fi
  case $FLEET_REGISTRY_URL in
    postgresql://*) echo "registry: postgresql://loragate@127.0.0.1:$FLEET_PG_PORT/loragate (password file $FLEET_PGPASSFILE)" ;;
    *) echo "registry: $FLEET_REGISTRY_URL" ;;
  esac
  echo "stats: http://127.0.0.1:$FLEET_STATS_PORT/"
}

cmd_down() {
  [ -n "${dir:-}" ] || die "down: --dir D is required"
  [ -d "$dir" ] || { echo "fleet: nothing to stop in $dir"; return 0; }
  stop_pidfile "$dir/haproxy.pid"
  local f pids=()
  # Replicas drain in parallel: SIGTERM to all, then wait for each.
  for f in "$dir"/replica-*.pid; do
    [ -f "$f" ] || continue
    (stop_pidfile "$f") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  pg_down
  echo "fleet: stopped ($dir)"
}

cmd_status() {
  load_env
  local i pid state
  for i in $(seq 1 "$FLEET_REPLICAS"); do
    pid=$(read_pid "$dir/replica-$i.pid")
    state=stopped
    if pid_alive "$pid"; then state="running (pid $pid)"; fi
    if http_ready "http://127.0.0.1:$((FLEET_PORT + i))"; then state+=", ready"; fi
    echo "replica-$i: http://127.0.0.1:$((FLEET_PORT + i)) $state"
  done
  pid=$(read_pid "$dir/haproxy.pid")
  state=stopped
  if pid_alive "$pid"; then state="running (pid $pid)"; fi
  echo "proxy: http://127.0.0.1:$FLEET_PORT $state"
  if pid_alive "$pid"; then
    # The replicas as the proxy sees them: backend,server,status.
    curl -sf --max-time 2 "http://127.0.0.1:$FLEET_STATS_PORT/;csv" |
      awk -F, '$2 ~ /^replica-/ { print "  " $1 "/" $2 ": " $18 }' || true
  fi
  if [ "$FLEET_POSTGRES" != off ]; then
    if as_pg "$(pg_bindir)/pg_ctl" -D "$dir/pg/data" status > /dev/null 2>&1; then
      echo "postgresql: 127.0.0.1:$FLEET_PG_PORT running"
    else
      echo "postgresql: 127.0.0.1:$FLEET_PG_PORT stopped"
    fi
  fi
}

cmd_restart_replica() {
  local index=""
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) dir=$2; shift 2 ;;
      --index) index=$2; shift 2 ;;
      *) die "restart-replica: unknown argument '$1'" ;;
    esac
  done
  [ -n "${dir:-}" ] || die "restart-replica: --dir D is required"
  load_env
  [[ $index =~ ^[0-9]+$ ]] && [ "$index" -ge 1 ] && [ "$index" -le "$FLEET_REPLICAS" ] ||
    die "restart-replica: --index must be 1..$FLEET_REPLICAS"
  stop_pidfile "$dir/replica-$index.pid"
  start_replica "$index"
  wait_ready "replica $index" "http://127.0.0.1:$((FLEET_PORT + index))" "$dir/replica-$index.log" \
    "$dir/replica-$index.pid" || exit 1
  echo "replica-$index: http://127.0.0.1:$((FLEET_PORT + index))"
}

[ $# -ge 1 ] || usage
command=$1
shift
dir=""
case $command in
  up) cmd_up "$@" ;;
  down)
    [ "${1:-}" = --dir ] && [ $# -eq 2 ] || die "usage: fleet.sh down --dir D"
    dir=$2
    [ -d "$dir" ] && dir=$(cd "$dir" && pwd)
    if [ -f "$dir/fleet.env" ]; then load_env; fi
    cmd_down
    ;;
  status)
    [ "${1:-}" = --dir ] && [ $# -eq 2 ] || die "usage: fleet.sh status --dir D"
    dir=$(cd "$2" && pwd) || die "no such directory: $2"
    cmd_status
    ;;
  restart-replica) cmd_restart_replica "$@" ;;
  pg-stop | pg-start)
    [ "${1:-}" = --dir ] && [ $# -eq 2 ] || die "usage: fleet.sh $command --dir D"
    dir=$(cd "$2" && pwd) || die "no such directory: $2"
    load_env
    [ -f "$dir/pg/data/PG_VERSION" ] || die "$dir has no PostgreSQL cluster"
    if [ "$command" = pg-stop ]; then pg_down; else pg_up; fi
    ;;
  haproxy-config)
    [ "${1:-}" = --replicas ] && [ "${3:-}" = --port ] && [ $# -eq 4 ] ||
      die "usage: fleet.sh haproxy-config --replicas N --port P"
    FLEET_REPLICAS=$2 FLEET_PORT=$4 FLEET_STATS_PORT=$(($4 + $2 + 2))
    haproxy_config
    ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$command' (up, down, status, restart-replica, pg-stop, pg-start)" ;;
esac
