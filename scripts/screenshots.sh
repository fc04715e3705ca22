#!/usr/bin/env bash
# Screenshots of the main views for docs/screenshots/, from real runs: records four local runs
# (a 4-rank DDP run, the same with a smaller batch, a 4-stage 1F1B pipeline and a run whose loss
# diverges) and a 2 x 2 sweep into a scratch database, then opens the window on it under Xvfb and saves each
# view with ringmaster-screenshots. Usage: bash scripts/screenshots.sh [PRESET] (default release).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}

bash scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" --target ringmaster ringmaster-node ringmaster-screenshots
bin=build/$preset/app
work=$(mktemp -d)
xvfb_pid=""
cleanup() {
  if [ -n "$xvfb_pid" ]; then kill "$xvfb_pid" 2>/dev/null || true; wait "$xvfb_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
db=$work/runs.db
run() { "$bin/ringmaster" --db "$db" run -q "$@" >/dev/null || true; }
run resources/examples/ddp_mlp.json --set telemetry.every_steps=1 --set train.steps=400
run resources/examples/ddp_mlp.json --set telemetry.every_steps=1 --set train.steps=400 \
  --set name=ddp_mlp_batch32 --set train.batch_size=32
run resources/examples/pipeline_mlp.json --set telemetry.every_steps=1 --set train.steps=40
# A run that fails while training (its data files are checked before launch, so missing data no
# longer makes a failed run): a learning rate that makes the loss diverge at the second step.
run resources/examples/ddp_mlp.json --set telemetry.every_steps=1 --set train.steps=200 \
  --set name=ddp_lr_too_high --set optimizer.lr=1e12
# A sweep (issue 37): the DDP example over two learning rates and two batch sizes, runs 5 to 8.
"$bin/ringmaster" --db "$db" sweep -q resources/examples/ddp_mlp.json --axis optimizer.lr=1e-3,3e-3 \
  --axis train.batch_size=32,64 --set telemetry.every_steps=1 --set train.steps=100 >/dev/null || true

display=:$((90 + RANDOM % 9))
Xvfb "$display" -screen 0 1440x900x24 -nolisten tcp >/dev/null 2>&1 &
xvfb_pid=$!
sleep 1
mkdir -p docs/screenshots
DISPLAY=$display "$bin/ringmaster-screenshots" --db "$db" --out docs/screenshots \
  --ddp 1 --other 2 --pipeline 3 --failed 4 --sweep 1 --editor-spec resources/examples/pipeline_mlp.json
