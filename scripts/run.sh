#!/usr/bin/env bash
# The README's main command: installs what is missing, builds the release configuration and runs the
# example job, a single-process training run of the 784-256-256-10 MLP, printing its progress.
# Telemetry (JSON Lines) is kept in runs/single_mlp.jsonl; progress goes to the terminal.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target ringmaster-node
mkdir -p runs
spec=${1:-resources/examples/single_mlp.json}
./build/release/app/ringmaster-node worker --spec "$spec" >"runs/$(basename "$spec" .json).jsonl"
echo "telemetry written to runs/$(basename "$spec" .json).jsonl"
