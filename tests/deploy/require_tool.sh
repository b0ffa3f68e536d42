# Sourced by the deploy tests. require_tool TEST TOOL... returns when every
# TOOL is found (a command, or an executable path). Otherwise it ends the
# script: with CI=true as a failure (CI installs them: scripts/setup.sh),
# elsewhere as a skip (it prints SKIPPED, which ctest reports as one).
PATH=$PATH:/usr/sbin:/sbin  # Debian installs haproxy there, outside a user's PATH
require_tool() {
  local test=$1 tool
  shift
  for tool in "$@"; do
    if [[ $tool == */* ]]; then
      compgen -G "$tool" > /dev/null && continue  # a path pattern
    else
      command -v "$tool" > /dev/null && continue
    fi
    if [ "${CI:-}" = true ]; then
      echo "$test: FAILED: $tool not found (CI=true: scripts/setup.sh installs it)"
      exit 1
    fi
    echo "$test: SKIPPED: $tool not found (scripts/setup.sh installs it; with CI=true this fails)"
    exit 0
  done
}
