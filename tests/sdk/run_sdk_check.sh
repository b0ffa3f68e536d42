#!/usr/bin/env bash
# The official OpenAI Node SDK against `loragate serve` on its embedded demo
# (issue 24): installs the SDK pinned in package.json / package-lock.json
# once into a cache ($LORAGATE_SDK_CACHE, else ~/.cache/loragate/sdk, one
# folder per lock file), starts the server as tests/serve/curl_quickstart.sh
# does and runs openai_sdk_check.mjs against it. Usage:
#   run_sdk_check.sh path/to/loragate
# Without node/npm it prints "SKIPPED: why" and exits 0; under CI=true that
# is a failure instead (scripts/setup.sh installs them). An npm registry out
# of reach is the network's doing, not the tree's: it skips everywhere,
# saying so.
# SDK_CHECK_TOOLS=0 leaves out the tool-call steps.
set -euo pipefail
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../serve/serve_helpers.sh"

skip() {
  if [ "${CI:-}" = true ] && [ "${offline:-}" != 1 ]; then
    echo "FAIL: $* (CI=true: the SDK check must run; scripts/setup.sh installs nodejs and npm)"
    exit 1
  fi
  echo "SKIPPED: $*"
  exit 0
}

command -v node > /dev/null || skip "node is not installed"
command -v npm > /dev/null || skip "npm is not installed"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || skip "node $(node --version) is too old for the openai SDK (18 or newer)"

# The SDK, installed once per lock file; a fresh install goes to a scratch
# folder first and is renamed into place, so a broken or concurrent install
# never leaves a half-filled cache behind.
lock_id=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
cache_root=${LORAGATE_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loragate/sdk}
mkdir -p "$cache_root" 2> /dev/null || cache_root="$(dirname "$bin")/../openai-sdk"
mkdir -p "$cache_root"
sdk="$cache_root/$lock_id"
if [ ! -f "$sdk/.installed" ]; then
  scratch=$(mktemp -d "$cache_root/.install-XXXXXX")
  cp "$here/package.json" "$here/package-lock.json" "$scratch/"
  echo "installing the openai SDK into $sdk"
  if ! (cd "$scratch" && timeout 200 npm ci --no-audit --no-fund --loglevel=error --fetch-retries=1) \
      > "$work/npm.log" 2>&1; then
    rm -rf "$scratch"
    offline=1
    skip "npm could not install the openai SDK (is the registry reachable?): $(head -3 "$work/npm.log" | tr '\n' ' ')"
  fi
  touch "$scratch/.installed"
  mv -T "$scratch" "$sdk" 2> /dev/null || rm -rf "$scratch"  # another run got there first
fi
# Node resolves `import 'openai'` from the script's folder: the check runs from the cache.
cp "$here/openai_sdk_check.mjs" "$sdk/openai_sdk_check.mjs"
echo "openai SDK $(node -p "require('$sdk/node_modules/openai/package.json').version") on node $(node --version)"

cat > "$work/config.yaml" << YAML
demo: {dir: $work/demo}
adapters: {registry: $work/registry.db}
YAML
start_server --config "$work/config.yaml"
echo "server at $url"

OPENAI_BASE_URL="$url/v1" node "$sdk/openai_sdk_check.mjs" || fail "the OpenAI SDK check failed (above)"

kill -TERM "$pid"
wait "$pid" && code=0 || code=$?
[ "$code" = 0 ] || fail "SIGTERM exit code $code"
