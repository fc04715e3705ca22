# Throughput and memory of every dp x tp x pp layout of 4 ranks on CPU (issue 34): `ringmaster-node
# agent` training the same GPT with Adam on byte-level text and the same global batch in each layout,
# dp as DDP and as FSDP. Prints tokens/s (best of the rounds, relative to 4x1x1 DDP measured in the
# same run) and, per rank, the peak the allocator measured during a step beside the engine's own
# estimate for that rank (`ringmaster-node estimate`, estimateMemory). No outside anchor: PyTorch
# 1.13 (Debian's) has no tensor parallelism to compare with.
import argparse
import json
import os
import subprocess
import tempfile

from agent_run import run_spec, step_times

RANKS = 4
MIB = 1024.0 * 1024.0
# (dp, tp, pp): every factorisation of 4 ranks.
LAYOUTS = [(4, 1, 1), (1, 4, 1), (1, 1, 4), (2, 2, 1), (2, 1, 2), (1, 2, 2)]
# FSDP only where it shards (dp > 1): with dp = 1 it holds the same state as DDP plus its flat
# buffers, which the estimate already accounts for and the memory suite checks.
CONFIGS = [(layout, "ddp") for layout in LAYOUTS] + \
          [(layout, "fsdp") for layout in LAYOUTS if layout[0] > 1]


def make_text(directory):
    """The byte-level English of the GPT example (scripts/make-text.sh), written in `directory`."""
    path = os.path.join(directory, "licenses.txt")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts",
                          "make-text.sh")
    subprocess.run(["bash", script, path], check=True, capture_output=True)
    return path


def gpt_spec(layout, dp_kind, text, args):
    dp, tp, pp = layout
    spec = {
        "name": "bench-mesh-layouts",
        "strategy": {"mesh": {"dp": dp, "tp": tp, "pp": pp}, "dp": {"kind": dp_kind}},
        "model": {"kind": "gpt", "vocab_size": 256, "context": args.context, "layers": args.layers,
                  "heads": args.heads, "dim": args.dim, "dropout": 0.0, "seed": 1},
        "data": {"kind": "text", "path": text, "val_fraction": 0.1},
        # The same global batch everywhere: each data-parallel replica takes its share (the tp
        # ranks of a replica see the same samples), the pipeline takes it in micro-batches.
        "train": {"steps": args.steps, "batch_size": args.global_batch // dp, "seed": 1},
        "optimizer": {"kind": "adam", "lr": 1e-3},
        "device": "cpu",
        "launch": {"hosts": [{"host": "localhost", "ranks": RANKS}]},
        "telemetry": {"every_steps": 1},
    }
    if pp > 1:
        spec["strategy"]["pp"] = {"schedule": "1f1b"}
        spec["train"]["micro_batches"] = args.micro_batches
    return spec


def engine_estimate(node, spec):
    """Each rank's estimated bytes from `ringmaster-node estimate`, or None where it has none."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        done = subprocess.run([node, "estimate", "--spec", path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if done.returncode != 0 or not done.stdout.strip().startswith("["):
        return None
    ranks = json.loads(done.stdout)
    return [r["total"] for r in ranks] if ranks else None


def run(node, spec, args):
    """(tokens/s, each rank's peak bytes over the timed steps) of one run."""
    events = run_spec(node, spec)
    times, peak = step_times(events), [0] * RANKS
    for e in events:
        if e["type"] == "step" and e["step"] > args.warmup:
            peak[e["rank"]] = max(peak[e["rank"]], e["mem_peak"])
    tokens = (args.steps - args.warmup) * args.global_batch * args.context
    return tokens / (times[args.steps] - times[args.warmup]), peak


def mib_list(values):
    return "/".join(f"{v / MIB:.1f}" for v in values) if values else "n/a"


def worst_miss(peak, estimate):
    if not estimate:
        return "n/a"
    return f"{max(abs(e - p) / p for p, e in zip(peak, estimate)) * 100:.0f} %"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node", default="build/release/app/ringmaster-node")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--global-batch", type=int, default=32, help="sequences per step")
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--context", type=int, default=64)
    args = parser.parse_args()

    print(f"GPT {args.layers} blocks, {args.heads} heads, width {args.dim}, context "
          f"{args.context}, vocab 256; {RANKS} CPU ranks, global batch {args.global_batch} "
          f"sequences ({args.global_batch * args.context} tokens), Adam; pp: 1f1b, "
          f"{args.micro_batches} micro-batches; best of {args.rounds} rounds, steps "
          f"{args.warmup + 1}-{args.steps} timed")
    print("memory in MiB per rank (rank 0/1/2/3): peak = the step events' mem_peak; estimate = "
          "`ringmaster-node estimate` (the engine's estimateMemory)")
    header = (f"{'dp x tp x pp':<13} {'dp':<5} {'tokens/s':>9} {'vs 4x1x1 ddp':>12} "
              f"{'peak':>24} {'estimate':>24} {'worst miss':>10}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as work:
        text = make_text(work)
        anchor = None
        for layout, dp_kind in CONFIGS:
            spec = gpt_spec(layout, dp_kind, text, args)
            best, peak = 0.0, None
            for _ in range(args.rounds):
                rate, peak = run(args.node, spec, args)
                best = max(best, rate)
            anchor = anchor or best
            estimate = engine_estimate(args.node, spec)
            print(f"{'x'.join(map(str, layout)):<13} {dp_kind:<5} {best:>9.0f} "
                  f"{best / anchor:>12.2f} {mib_list(peak):>24} {mib_list(estimate):>24} "
                  f"{worst_miss(peak, estimate):>10}", flush=True)


if __name__ == "__main__":
    main()
