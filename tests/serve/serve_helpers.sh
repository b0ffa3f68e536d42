# Sourced by the serve scripts: a scratch dir, fail(), and start_server
# ARGS... which runs `$bin serve ARGS... --port 0` in the background and sets
# $pid and $url once it prints "serving ... on URL". Needs $bin set; with
# $serve_fd_limit set, the server alone runs under `ulimit -n` of it.
work=$(mktemp -d)
trap 'kill -9 "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- server output:"; cat "$work/server.log"; exit 1; }

start_server() {
  (if [ -n "${serve_fd_limit:-}" ]; then ulimit -n "$serve_fd_limit"; fi
   exec "$bin" serve "$@" --port 0) > "$work/server.log" 2>&1 &
  pid=$!
  url=
  for _ in $(seq 1 600); do
    url=$(grep -o 'on http://[0-9.:]*' "$work/server.log" | head -1 | cut -c4- || true)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || fail "server exited at start"
    sleep 0.1
  done
  [ -n "$url" ] || fail "server did not print its URL"
}
