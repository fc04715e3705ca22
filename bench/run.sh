#!/usr/bin/env bash
# Builds the release configuration and runs every benchmark with its anchor (python3-torch; oneDNN
# from libdnnl-dev for gemm_bench).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh python3-torch libdnnl-dev
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target train_step_bench gpt_step_bench gemm_bench \
  storage_bench scale_bench ssh_launch_bench gui_bench ringmaster-node web_series_bench ringmaster \
  ringmaster_web_assets
./build/release/bench/train_step_bench
./build/release/bench/gpt_step_bench
./build/release/bench/gemm_bench
./build/release/bench/storage_bench
# A simulated 16,384-rank run's telemetry for 150 s, a desktop view and the web's band request open.
QT_QPA_PLATFORM=offscreen ./build/release/bench/scale_bench
./build/release/bench/ssh_launch_bench
QT_QPA_PLATFORM=offscreen ./build/release/bench/gui_bench
# Writes its 64-rank x 1M-step run once (tens of minutes), kept in build/release/bench/web_series_cache.
./build/release/bench/web_series_bench
node bench/web_first_chart.mjs --ringmaster build/release/app/ringmaster \
  --node-modules build/release/resources/web/npm/node_modules \
  --db build/release/bench/web_series_cache/web-64x1000000.db
# 50 live pages on a recorded run against the same run without a server (about 5 minutes).
/usr/bin/python3 bench/web_load.py --build build/release
/usr/bin/python3 bench/comm_vs_torch.py --node build/release/app/ringmaster-node
/usr/bin/python3 bench/ddp_vs_torch.py --node build/release/app/ringmaster-node
/usr/bin/python3 bench/strategies.py --node build/release/app/ringmaster-node
/usr/bin/python3 bench/mesh_layouts.py --node build/release/app/ringmaster-node
