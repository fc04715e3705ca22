# DDP training throughput on CPU: `ringmaster-node agent` running the DDP strategy beside PyTorch's
# DistributedDataParallel over Gloo (torch_ddp.py), same MLP, batch per rank, SGD with momentum and
# step count, at 1, 2 and 4 local ranks, alternating the two for a few rounds (best round kept, as
# these machines are noisy). Prints samples/s of each and the ratio (ours / PyTorch's: above 1 is
# faster). Throughput counts the steps after the warm-up, from rank 0's step events.
import argparse
import json
import os
import socket
import subprocess
import sys

from agent_run import run_spec, step_times

HERE = os.path.dirname(os.path.abspath(__file__))

MODELS = {
    "784-256-256-10": [784, 256, 256, 10],
    "784-8x1024-10": [784] + [1024] * 8 + [10],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(node, layers, ranks, args):
    spec = {
        "name": "bench-ddp",
        "strategy": {"kind": "ddp"},
        "model": {"kind": "mlp", "layers": layers, "seed": 1},
        "data": {"kind": "synthetic", "samples": 65536, "features": layers[0],
                 "classes": layers[-1], "seed": 1},
        "train": {"steps": args.steps, "batch_size": args.batch},
        "optimizer": {"kind": "sgd", "lr": 0.01, "momentum": 0.9},
        "device": "cpu",
        "launch": {"hosts": [{"host": "localhost", "ranks": ranks}]},
        "telemetry": {"every_steps": 1},
    }
    events = run_spec(node, spec)
    times = step_times(events)
    samples = (args.steps - args.warmup) * args.batch * ranks
    return samples / (times[args.steps] - times[args.warmup])


def torch_ddp(layers, ranks, args):
    port = free_port()
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "torch_ddp.py"), "--layers",
             ",".join(map(str, layers)), "--batch", str(args.batch), "--steps", str(args.steps),
             "--warmup", str(args.warmup)],
            env=env, stdout=subprocess.PIPE, text=True))
    result = None
    for rank, p in enumerate(procs):
        out, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"torch_ddp.py rank {rank} failed with {p.returncode}")
        if rank == 0:
            result = json.loads(out.strip().splitlines()[-1])["samples_per_s"]
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--node", required=True)
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    print(f"DDP on CPU, batch {args.batch} per rank, SGD momentum, {args.steps - args.warmup} timed "
          f"steps after {args.warmup}; best of {args.rounds} rounds; {os.cpu_count()} cores")
    print(f"{'model':>16} {'ranks':>5} {'ours samples/s':>15} {'torch samples/s':>16} {'ratio':>6}")
    for name, layers in MODELS.items():
        for ranks in [int(r) for r in args.ranks.split(",")]:
            a = b = 0.0
            for _ in range(args.rounds):
                a = max(a, ours(args.node, layers, ranks, args))
                b = max(b, torch_ddp(layers, ranks, args))
            print(f"{name:>16} {ranks:>5} {a:>15.0f} {b:>16.0f} {a / b:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
