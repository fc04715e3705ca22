#!/usr/bin/env bash
# Builds the release configuration and runs every benchmark with its anchor (python3-torch).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh python3-torch
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target train_step_bench comm_bench
./build/release/bench/train_step_bench
./build/release/bench/comm_bench
