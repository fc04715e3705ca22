#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and runs the whole suite through
# CTest in the configurations that must pass: fuzz (the libFuzzer corpora replayed), asan
# (AddressSanitizer + UndefinedBehaviorSanitizer on the layers they guard, see tests/README.md;
# built without CUDA and without the GUI, so it is also the check that the product builds there,
# and it runs the main job headless), tsan (ThreadSanitizer, the communication layer's tests: label
# "comm"), and dev (with the CUDA path where the toolkit is installed; the suites asan cannot run:
# tests/README.md, "Which configuration runs what"). The dev run goes last so that the final lines
# are its CTest summary; any failing configuration fails the script. Every compile goes through
# ccache, and each stage's time is printed at the end (budget: 45 minutes on a fresh clone on CI's
# 2 cores, 20 where the machine built the same sources before).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
jobs=$(nproc)
failed=()
start=$SECONDS
# Each stage's time, printed at the end so that every log shows the budget (45 minutes on a fresh
# clone of CI's 2 cores, 20 where ccache holds the same sources: tests/README.md, "Build time").
stage_names=()
stage_seconds=()
stage_start=$SECONDS
stamp() {  # stamp CONFIGURATION WHAT: ends the stage before, begins this one
  if ((${#stage_names[@]})); then stage_seconds+=($((SECONDS - stage_start))); fi
  stage_names+=("$1 $2")
  stage_start=$SECONDS
  echo "=== [$1] $2 ($(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s since the start)"
}
stage_table() {
  local i
  echo "=== stage times (compiler cache: $(ccache_summary))"
  for i in "${!stage_seconds[@]}"; do
    minutes "${stage_names[$i]}" "${stage_seconds[$i]}"
  done
  minutes total $((SECONDS - start))
}
minutes() { awk -v name="$1" -v s="$2" 'BEGIN { printf "  %-34s %5.1f min\n", name, s / 60 }'; }
ccache_summary() {
  command -v ccache >/dev/null || { echo "none"; return; }
  ccache --print-stats 2>/dev/null | awk -F'\t' '
    /^(direct_cache_hit|preprocessed_cache_hit)\t/ {hit += $2}
    /^cache_miss\t/ {miss = $2}
    END {printf "%d hits, %d misses since the start", hit, miss}'
}
command -v ccache >/dev/null && ccache --zero-stats >/dev/null

configure() {  # configure PRESET [CMAKE ARGS...]: quiet unless it fails
  cmake --preset "$@" >"build-$1.log" 2>&1 || { cat "build-$1.log"; exit 1; }
  grep '\[ringmaster\]' "build-$1.log" || true
}

# fuzz: the libFuzzer targets (clang, ASan + UBSan) replay their checked-in corpora, crash
# reproducers included. Only the fuzzers and the libraries they link are built.
stamp fuzz "configure and build"
configure fuzz
cmake --build --preset fuzz -j "$jobs" --target fuzzers
stamp fuzz test
ctest --preset fuzz -j "$jobs" || failed+=(fuzz)

# The main job, headless, from a build without CUDA and without the GUI (asan's: its memory errors
# would show here too): a local multi-rank run recorded to SQLite, then shown.
smoke_run() {
  local smoke bin=build/asan/app/ringmaster
  smoke=$(mktemp -d)
  if ! { "$bin" --db "$smoke/runs.db" run resources/examples/ddp_mlp.json --set train.steps=20 &&
    "$bin" --db "$smoke/runs.db" show 1; }; then
    failed+=(main-job)
  fi
  rm -rf "$smoke"
}

# The output of every test that did not pass in a CTest log (Testing/Temporary/LastTest.log),
# without GoogleTest's banner lines: what a flaky failure said is gone once the test is rerun.
first_run_output() {
  awk '
    / Testing: / { block = ""; keep = 0 }
    { block = block $0 "\n" }
    /^Test (Failed|Timeout)|Exception:|\*\*\*Failed|\*\*\*Timeout/ { keep = 1 }
    /time elapsed:/ { if (keep) printf "%s", block; block = "" }
  ' "$1" 2>/dev/null |
    grep -vE '^(Running main|Note: Google Test|\[==========\]|\[----------\]|Directory:|-+$|$)' || true
}

# dev builds and runs what the sanitizer configurations cannot: the suites marked DEV_ONLY, GPU or
# DEV_TOO (tests/README.md, "Which configuration runs what"), not asan's library suites once more.
declare -A preset_options=([dev]=-DRINGMASTER_TEST_SANITIZED_SUITES=OFF)
for preset in asan tsan dev; do
  stamp "$preset" "configure and build"
  configure "$preset" ${preset_options[$preset]:-}
  cmake --build --preset "$preset" -j "$jobs"
  if [ "$preset" = asan ]; then
    stamp asan "the main job, headless"
    smoke_run
  fi
  stamp "$preset" test
  ctest --preset "$preset" -j "$jobs" 2>&1 | tee "build-$preset-ctest.log" ||
    failed+=("$preset")
done
stamp all done
stage_table
# The log's last lines stay CTest's summary of the whole suite's last configuration.
echo "=== [dev] CTest's summary, once more"
grep -E 'tests passed|tests failed out of|Total Test time' build-dev-ctest.log || true
rm -f build-*.log
if ((${#failed[@]})); then
  # A failure must be diagnosable from the end of the log alone: name the failed tests of every
  # failed configuration and run them once more with their output (the verdict stays "failed").
  for preset in "${failed[@]}"; do
    [ "$preset" = main-job ] && continue  # its output is above
    echo "=== [$preset] failed tests"
    cat "build/$preset/Testing/Temporary/LastTestsFailed.log" 2>/dev/null || true
    first_run_output "build/$preset/Testing/Temporary/LastTest.log" >"build-$preset-failures.log"
    echo "=== [$preset] the failed tests once more (a pass here means the failure is intermittent)"
    ctest --preset "$preset" --rerun-failed 2>&1 | grep -E '^ *[0-9]+/[0-9]+ Test|tests passed' ||
      true
    echo "=== [$preset] the failed tests' own output, from the run that failed"
    tail -n 120 "build-$preset-failures.log"
    rm -f "build-$preset-failures.log"
  done
  echo "FAILED configurations: ${failed[*]}"
  exit 1
fi
