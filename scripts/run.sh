#!/usr/bin/env bash
# The README's main command: installs what is missing, builds the release configuration and runs the
# example job through the node agent: 4 local ranks training the 784-256-256-10 MLP with DDP over
# Gloo. Every rank's telemetry (JSON Lines) is kept in runs/<spec>.jsonl; progress goes to the
# terminal. Pass another spec as the first argument.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target ringmaster-node
mkdir -p runs
spec=${1:-resources/examples/ddp_mlp.json}
out="runs/$(basename "$spec" .json).jsonl"
./build/release/app/ringmaster-node agent --spec "$spec" --ignore-stdin >"$out"
echo "telemetry of every rank written to $out"
