# The PyTorch anchor of bench/comm_vs_torch.py: times torch.distributed's Gloo collectives (Debian's
# python3-torch) the way `ringmaster-node bench-comm` times ours (nccl-tests' method: w warm-up
# iterations, then n timed ones, the slowest rank's mean), one process per rank over loopback, and
# prints one JSON line per (op, bytes) from rank 0: {"op", "bytes", "us"} (us null for an op this
# Gloo lacks).
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def make_call(op, n, world):
    if op == "all_reduce":
        t = torch.ones(n)
        return lambda: dist.all_reduce(t)
    if op == "broadcast":
        t = torch.ones(n)
        return lambda: dist.broadcast(t, 0)
    if op == "all_gather":
        inp = torch.ones(n // world)
        outs = [torch.empty(n // world) for _ in range(world)]
        return lambda: dist.all_gather(outs, inp)  # Gloo in 1.13 has no all_gather_into_tensor
    if op == "reduce_scatter":
        inp = torch.ones(n)
        out = torch.empty(n // world)
        return lambda: dist.reduce_scatter_tensor(out, inp)
    if op == "all_to_all":
        inp = torch.ones(n)
        out = torch.empty(n)
        return lambda: dist.all_to_all_single(out, inp)
    raise ValueError(op)


def run(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    sizes = [int(x) for x in args.sizes.split(",")]
    iters = [int(x) for x in args.iters.split(",")]
    iters = iters * len(sizes) if len(iters) == 1 else iters
    for op in args.ops.split(","):
        for nbytes, n_iters in zip(sizes, iters):
            n = nbytes // 4
            if op in ("all_gather", "reduce_scatter", "all_to_all"):
                n -= n % args.ranks
            try:
                call = make_call(op, n, args.ranks)
                for _ in range(args.warmup):
                    call()
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(n_iters):
                    call()
                mean = torch.tensor([(time.perf_counter() - t0) / n_iters], dtype=torch.float64)
                dist.all_reduce(mean, op=dist.ReduceOp.MAX)  # the slowest rank, as nccl-tests
                us = mean.item() * 1e6
            except RuntimeError:  # an op this Gloo build lacks
                us = None
            dist.barrier()
            if rank == 0:
                print(json.dumps({"op": op, "bytes": n * 4, "us": us}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ops", default="all_reduce")
    parser.add_argument("--sizes", required=True, help="comma-separated bytes")
    parser.add_argument("--iters", default="20", help="timed iterations, one or one per size")
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    mp.spawn(run, args=(args,), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
