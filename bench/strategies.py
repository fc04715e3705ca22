# Throughput and memory of every strategy on CPU: `ringmaster-node agent` training the same MLP
# with Adam on 4 local ranks and the same global batch under DDP, FSDP in its three sharding modes
# and the pipeline schedules. Prints samples/s (best of the rounds, relative to DDP) and, per rank,
# the allocator's bytes in use at the end of a step (the model state: parameters, gradients,
# optimizer state, plus the last batch's activations the modules keep) and its peak during a step,
# beside what the ZeRO paper's formulas predict for the model state with float32 Adam
# (4 bytes of parameter, 4 of gradient and 8 of optimizer state per parameter).
import argparse

from agent_run import run_spec, step_times

WIDTHS = [784] + [1024] * 8 + [10]
RANKS = 4
MIB = 1024.0 * 1024.0

STRATEGIES = [
    ("ddp", {"kind": "ddp"}),
    ("fsdp no_shard", {"kind": "fsdp", "sharding": "no_shard"}),
    ("fsdp shard_grad_op", {"kind": "fsdp", "sharding": "shard_grad_op"}),
    ("fsdp full_shard", {"kind": "fsdp", "sharding": "full_shard"}),
    ("pipeline gpipe", {"kind": "pipeline", "schedule": "gpipe"}),
    ("pipeline 1f1b", {"kind": "pipeline", "schedule": "1f1b"}),
    ("pipeline interleaved_1f1b v=2",
     {"kind": "pipeline", "schedule": "interleaved_1f1b", "virtual_stages": 2}),
    ("pipeline zb_h1", {"kind": "pipeline", "schedule": "zb_h1"}),
]


def layer_parameters():
    return [WIDTHS[i] * WIDTHS[i + 1] + WIDTHS[i + 1] for i in range(len(WIDTHS) - 1)]


def balanced_split(weights, parts):
    """The engine's partition (engine/parallel/pipeline.cpp): contiguous runs, smallest largest."""
    n = len(weights)
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0
    for k in range(1, parts + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                cost = max(best[k - 1][j], prefix[i] - prefix[j])
                if cost < best[k][i]:
                    best[k][i], cut[k][i] = cost, j
    starts, i = [], n
    for k in range(parts, 0, -1):
        starts.append(cut[k][i])
        i = cut[k][i]
    starts.reverse()
    return [sum(weights[s:e]) for s, e in zip(starts, starts[1:] + [n])]


def predicted_state_bytes(strategy):
    """Model state per rank by the ZeRO formulas: (between steps, the least a step adds to it).

    Between steps every sharded mode holds 1/N of parameters, gradients and Adam state (FSDP's
    shard_grad_op reshards parameters after backward); within a step ZeRO-2 (shard_grad_op) holds
    the whole 4 bytes x parameters from forward to backward, ZeRO-3 (full_shard) a unit gathered
    and the next one prefetched."""
    layers = layer_parameters()
    psi = sum(layers)
    kind = strategy["kind"]
    if kind == "ddp" or strategy.get("sharding") == "no_shard":
        return [16 * psi] * RANKS, [0] * RANKS
    if strategy.get("sharding") == "shard_grad_op":
        return [16 * psi / RANKS] * RANKS, [4 * psi - 4 * psi / RANKS] * RANKS
    if kind == "fsdp":
        largest_two = sum(sorted(layers)[-2:])
        return [16 * psi / RANKS] * RANKS, [4 * largest_two] * RANKS
    v = strategy.get("virtual_stages", 1)
    stages = balanced_split(layers, RANKS * v)
    own = [16 * sum(stages[s] for s in range(r, RANKS * v, RANKS)) for r in range(RANKS)]
    return own, [0] * RANKS


def run(node, strategy, args):
    pipeline = strategy["kind"] == "pipeline"
    spec = {
        "name": "bench-strategies",
        "strategy": strategy,
        "model": {"kind": "mlp", "layers": WIDTHS, "seed": 1},
        "data": {"kind": "synthetic", "samples": 16384, "features": WIDTHS[0],
                 "classes": WIDTHS[-1], "seed": 1},
        # The same global batch everywhere: data-parallel ranks take a share each, the pipeline
        # takes all of it in micro-batches.
        "train": {"steps": args.steps,
                  "batch_size": args.global_batch if pipeline else args.global_batch // RANKS},
        "optimizer": {"kind": "adam", "lr": 1e-4},
        "device": "cpu",
        "launch": {"hosts": [{"host": "localhost", "ranks": RANKS}]},
        "telemetry": {"every_steps": 1},
    }
    if pipeline:
        spec["train"]["micro_batches"] = args.micro_batches
    events = run_spec(node, spec)
    times, allocated, peak = step_times(events), [0] * RANKS, [0] * RANKS
    for e in events:
        if e["type"] == "step" and e["step"] > args.warmup:
            allocated[e["rank"]] = max(allocated[e["rank"]], e["mem_allocated"])
            peak[e["rank"]] = max(peak[e["rank"]], e["mem_peak"])
    samples = (args.steps - args.warmup) * args.global_batch
    return samples / (times[args.steps] - times[args.warmup]), allocated, peak


def mib_list(values):
    return "/".join(f"{v / MIB:.0f}" for v in values)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node", default="build/release/app/ringmaster-node")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--global-batch", type=int, default=128)
    parser.add_argument("--micro-batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    psi = sum(layer_parameters())
    print(f"MLP {'-'.join(map(str, WIDTHS))}: {psi / 1e6:.2f} M parameters, {RANKS} CPU ranks, "
          f"global batch {args.global_batch}, Adam; pipeline: {args.micro_batches} micro-batches; "
          f"best of {args.rounds} rounds")
    print("memory in MiB per rank (rank 0/1/2/3). predicted state: parameters, gradients and Adam "
          "state by the ZeRO formulas;\nstate+in-step: plus the unsharded parameters a step must "
          "hold at once (activations and in-flight gradients not counted)")
    header = (f"{'strategy':<32} {'samples/s':>10} {'vs ddp':>7} {'predicted state':>16} "
              f"{'end-of-step alloc':>18} {'state+in-step':>16} {'peak in step':>16}")
    print(header)
    print("-" * len(header))
    ddp_rate = None
    for name, strategy in STRATEGIES:
        best, allocated, peak = 0.0, None, None
        for _ in range(args.rounds):
            rate, allocated, peak = run(args.node, strategy, args)
            best = max(best, rate)
        ddp_rate = ddp_rate or best
        state, in_step = predicted_state_bytes(strategy)
        print(f"{name:<32} {best:>10.0f} {best / ddp_rate:>7.2f} {mib_list(state):>16} "
              f"{mib_list(allocated):>18} {mib_list([a + b for a, b in zip(state, in_step)]):>16} "
              f"{mib_list(peak):>16}", flush=True)


if __name__ == "__main__":
    main()
