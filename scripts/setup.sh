#!/usr/bin/env bash
# Installs every Debian package loragate needs to build, test and benchmark,
# and the packages named as arguments (what a CI job adds). Idempotent: packages already present are left alone, and apt is only asked
# when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev         # tests
  nlohmann-json3-dev                # JSON: configs, safetensors headers, tokenizer.json
  libpcre2-dev                      # Unicode regexes of byte-level pre-tokenisers
  libcli11-dev                      # the loragate command line (subcommands, typed flags, help)
  libboost-dev                      # Boost.Beast/Asio: the HTTP gateway (header-only)
  libsqlite3-dev                    # the adapter registry
  libpq-dev postgresql              # the registry on PostgreSQL (a fleet), and its tests
  libyaml-cpp-dev                   # configs/*.yaml
  wrk                               # HTTP load for the gateway benchmark
  libutf8proc-dev                   # NFC normalisation of tokenizer.json
  python3 python3-numpy             # the reference tool in ../shared/tools (debugging only)
  curl                              # the README's examples
  chromium                          # headless rendering of the evaluator's HTML report in its test (skipped without it)
  postgresql libpq-dev              # the fleet's shared registry (issue 22): the client library serve links,
                                    # and the server scripts/fleet.sh runs a private cluster of
  haproxy                           # the fleet's proxy (scripts/fleet.sh, deploy/haproxy/) and its config test
  python3-yaml                      # tests/deploy/check_manifests.py parses deploy/kubernetes offline
  json-schema-test-suite            # the official JSON Schema test cases: structured output must never accept an invalid instance
  python3-jsonschema                # tests/gateway/validate_instances.py: structured output checked by a real validator
  "$@"                              # what a job adds (scripts/fuzz.sh: clang; scripts/sanitize.sh: runtimes)
)

# node and npm run the official OpenAI SDK against loragate (tests/sdk). A
# node from elsewhere (NodeSource's nodejs bundles npm, and Debian's npm
# package conflicts with it) is left alone: Debian's are added only when absent.
if ! command -v npm > /dev/null 2>&1; then
  if ! command -v node > /dev/null 2>&1; then
    packages+=(nodejs npm)
  elif dpkg-query -W -f='${Version}' nodejs 2>/dev/null | grep -qv nodesource; then
    packages+=(npm)                 # Debian's nodejs without its npm
  else
    echo "setup: node is installed but npm is not; tests/sdk's OpenAI SDK check needs npm" >&2
  fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
