#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs the whole suite through
# CTest in the configurations that must pass: asan (AddressSanitizer + UndefinedBehaviorSanitizer),
# tsan (ThreadSanitizer, the communication layer's tests: label "comm"), cpu-only, and dev (with
# the CUDA path where the toolkit is installed). The dev run goes last so that the final lines are
# its CTest summary; any failing configuration fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
jobs=$(nproc)
failed=()
for preset in asan tsan cpu-only dev; do
  echo "=== [$preset] configure and build"
  cmake --preset "$preset" >"build-$preset.log" 2>&1 || { cat "build-$preset.log"; exit 1; }
  grep '\[ringmaster\]' "build-$preset.log" || true
  cmake --build --preset "$preset" -j "$jobs"
  echo "=== [$preset] test"
  ctest --preset "$preset" -j "$jobs" || failed+=("$preset")
done
rm -f build-*.log
if ((${#failed[@]})); then
  # A failure must be diagnosable from the end of the log alone: name the failed tests of every
  # failed configuration and run them once more with their output (the verdict stays "failed").
  for preset in "${failed[@]}"; do
    echo "=== [$preset] failed tests"
    cat "build/$preset/Testing/Temporary/LastTestsFailed.log" 2>/dev/null || true
    echo "=== [$preset] the failed tests once more, with output"
    ctest --preset "$preset" --rerun-failed --output-on-failure 2>&1 | tail -n 150 || true
  done
  echo "FAILED configurations: ${failed[*]}"
  exit 1
fi
