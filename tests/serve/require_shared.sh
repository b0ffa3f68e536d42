# Sourced by the serve scripts that need ../shared. require_shared NAME FILE
# returns when FILE exists. Otherwise it ends the script: with CI=true as a
# failure (CI must never pass on tests that did not run), elsewhere as a skip
# (it prints SKIPPED, which ctest's SKIP_REGULAR_EXPRESSION reports as one).
# A missing GPU or CPU feature is not a fixture; this is only for ../shared.
require_shared() {
  [ -e "$2" ] && return 0
  if [ "${CI:-}" = true ]; then
    echo "$1: FAILED: shared test data not found: $2 (CI=true: a missing fixture fails; fetch ../shared or set LORAGATE_SHARED_DIR)"
    exit 1
  fi
  echo "$1: SKIPPED: shared test data not found: $2 (set LORAGATE_SHARED_DIR; with CI=true this fails)"
  exit 0
}
