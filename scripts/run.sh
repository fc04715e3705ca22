#!/usr/bin/env bash
# The README's main command: installs what is missing, builds the release configuration and opens
# Ringmaster's window with the example job launched into it: 4 local ranks training the
# 784-256-256-10 MLP with DDP over Gloo, every event recorded in the run database (runs/runs.db
# here; the XDG default when you run ringmaster yourself) and streaming into the live charts.
# Without a display (no DISPLAY / WAYLAND_DISPLAY) the same run goes headless through
# `ringmaster run`, with live progress on the terminal and the run's summary from the database at
# the end. Pass another spec as the first argument.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target ringmaster ringmaster-node
spec=${1:-resources/examples/ddp_mlp.json}
./build/release/app/ringmaster --db runs/runs.db --launch "$spec"
echo "recorded in runs/runs.db: ./build/release/app/ringmaster --db runs/runs.db [runs | show ID | compare ID ID | export ID --trace FILE.json]"
