#!/usr/bin/env bash
# Builds the release configuration and runs the benchmarks with their anchors (python3-torch;
# OpenBLAS and oneDNN for gemm_bench; OpenMPI for comm_vs_mpi.py), each one's output also kept
# in build/release/bench/logs/NAME.log; then prints every benchmark's ratio table(s) again,
# together, with the processor named. A benchmark that fails is reported and the others still run.
#
#   bash bench/run.sh                  every benchmark
#   bash bench/run.sh comm mpi ddp     only those named
#   bash bench/run.sh --list           the names
set -euo pipefail
cd "$(dirname "$0")/.."

# One line per benchmark: its name | the targets it needs built | an awk pattern for the header
# line of each table the summary shows (the table runs to the next blank line; the title above it
# comes too). Its command is the function run_NAME below. Add a benchmark here and there.
benchmarks=(
  "train_step     | train_step_bench                          | ours / torch"
  "gpt_step       | gpt_step_bench                            | ours / torch"
  "gemm           | gemm_bench                                | engine picks"
  "storage        | storage_bench                             | [ |]ratio([ |]|$)"
  "scale          | scale_bench                               | events/s|p99|max ms"
  "ssh_launch     | ssh_launch_bench ringmaster-node          | [ |]ratio([ |]|$)"
  "gui            | gui_bench                                 | draw ms|max ms"
  "web_series     | web_series_bench ringmaster               | [ |]ratio([ |]|$)"
  "web_first_chart| ringmaster ringmaster_web_assets          | first chart ms"
  "web_load       | ringmaster ringmaster-node ringmaster_web_assets | served / bare"
  "comm           | ringmaster-node                           | [ |]ratio([ |]|$)"
  "mpi            | ringmaster-node mpi_collectives           | [ |]ratio([ |]|$)"
  "ddp            | ringmaster-node                           | [ |]ratio([ |]|$)"
  "strategies     | ringmaster-node                           | vs ddp"
  "mesh_layouts   | ringmaster-node                           | vs 4x1x1"
)

release=build/release
node=$release/app/ringmaster-node
# Both of issue 36's MLPs: the default 784-256-256-10, and 784-8x1024-10.
run_train_step() {
  ./$release/bench/train_step_bench
  echo
  ./$release/bench/train_step_bench --layers 784,1024,1024,1024,1024,1024,1024,1024,1024,10
}
run_gpt_step() { ./$release/bench/gpt_step_bench; }
run_gemm() { ./$release/bench/gemm_bench; }
run_storage() { ./$release/bench/storage_bench; }
# A simulated 16,384-rank run's telemetry for 150 s, a desktop view and the web's band request open.
run_scale() { QT_QPA_PLATFORM=offscreen ./$release/bench/scale_bench; }
run_ssh_launch() { ./$release/bench/ssh_launch_bench; }
run_gui() { QT_QPA_PLATFORM=offscreen ./$release/bench/gui_bench; }
# Writes its 64-rank x 1M-step run once (tens of minutes), kept in build/release/bench/web_series_cache.
run_web_series() { ./$release/bench/web_series_bench; }
run_web_first_chart() {
  node bench/web_first_chart.mjs --ringmaster $release/app/ringmaster \
    --node-modules $release/resources/web/npm/node_modules \
    --db $release/bench/web_series_cache/web-64x1000000.db
}
# 50 live pages on a recorded run against the same run without a server (about 5 minutes).
run_web_load() { /usr/bin/python3 bench/web_load.py --build $release; }
run_comm() { /usr/bin/python3 bench/comm_vs_torch.py --node $node; }
run_mpi() { /usr/bin/python3 bench/comm_vs_mpi.py --node $node; }
run_ddp() { /usr/bin/python3 bench/ddp_vs_torch.py --node $node; }
run_strategies() { /usr/bin/python3 bench/strategies.py --node $node; }
run_mesh_layouts() { /usr/bin/python3 bench/mesh_layouts.py --node $node; }

field() { cut -d'|' -f"$2" <<<"$1" | sed 's/^ *//; s/ *$//'; }

declare -A targets pattern
names=()
for line in "${benchmarks[@]}"; do
  name=$(field "$line" 1)
  names+=("$name")
  targets[$name]=$(field "$line" 2)
  pattern[$name]=$(field "$line" 3-)
done

if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${names[@]}"
  exit 0
fi
chosen=("$@")
((${#chosen[@]})) || chosen=("${names[@]}")
for name in "${chosen[@]}"; do
  [[ -v "targets[$name]" ]] || { echo "unknown benchmark: $name (bash bench/run.sh --list)" >&2; exit 2; }
done

bash scripts/install-deps.sh python3-torch openmpi-bin libopenmpi-dev
cmake --preset release >/dev/null
# shellcheck disable=SC2046 # the targets are words
cmake --build --preset release -j "$(nproc)" --target $(for n in "${chosen[@]}"; do echo "${targets[$n]}"; done | tr ' ' '\n' | sort -u)

logs=$release/bench/logs
mkdir -p "$logs"
declare -A status
for name in "${chosen[@]}"; do
  echo "=== $name"
  if "run_$name" 2>&1 | tee "$logs/$name.log"; then status[$name]=ok; else status[$name]="failed (exit ${PIPESTATUS[0]})"; fi
done

# The summary: each table whose header matches the benchmark's pattern, with the title above it.
tables() {
  awk -v pat="$2" '
    $0 ~ pat { if (title != "") print title; shown = 1 }
    shown && NF == 0 { print ""; shown = 0 }
    shown { print; next }
    NF { title = $0 }' "$1"
}
echo
echo "=== Summary: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M UTC')"
for name in "${chosen[@]}"; do
  echo
  echo "--- $name: ${status[$name]} (log: $logs/$name.log)"
  tables "$logs/$name.log" "${pattern[$name]}"
done
