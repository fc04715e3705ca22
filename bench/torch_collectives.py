# The PyTorch anchor of bench/comm_bench: times torch.distributed's Gloo collectives (Debian's
# python3-torch) with the same ranks, sizes and iteration counts, one process per rank over
# loopback, best of three runs, and prints one JSON line per (op, bytes) from rank 0:
# {"op", "bytes", "us"} (us null for an op this Gloo lacks).
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def iters_for(nbytes):
    return 5 if nbytes >= 16 << 20 else 20 if nbytes >= 1 << 20 else 100


def run(rank, world, port, ops, sizes):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for op in ops:
        for nbytes in sizes:
            n = max(nbytes // 4, world)
            n -= n % world
            if op == "all_reduce":
                t = torch.ones(n)
                call = lambda: dist.all_reduce(t)
            elif op == "broadcast":
                t = torch.ones(n)
                call = lambda: dist.broadcast(t, 0)
            elif op == "all_gather":
                inp = torch.ones(n // world)
                outs = [torch.empty(n // world) for _ in range(world)]
                call = lambda: dist.all_gather(outs, inp)  # Gloo in 1.13 has no all_gather_into_tensor
            elif op == "reduce_scatter":
                inp = torch.ones(n)
                out = torch.empty(n // world)
                call = lambda: dist.reduce_scatter_tensor(out, inp)
            elif op == "all_to_all":
                inp = torch.ones(n)
                out = torch.empty(n)
                call = lambda: dist.all_to_all_single(out, inp)
            else:
                continue
            try:
                call()  # warm-up
                elapsed = None
                for _ in range(3):  # best of three runs, as comm_bench does
                    dist.barrier()
                    start = time.perf_counter()
                    for _ in range(iters_for(nbytes)):
                        call()
                    run_s = (time.perf_counter() - start) / iters_for(nbytes)
                    elapsed = run_s if elapsed is None else min(elapsed, run_s)
            except RuntimeError as e:  # e.g. an op this Gloo build lacks
                elapsed = None
            dist.barrier()
            if rank == 0:
                print(json.dumps({"op": op, "bytes": n * 4, "us": None if elapsed is None else elapsed * 1e6}), flush=True)
    dist.destroy_process_group()


def main():
    world = int(sys.argv[1])
    port = int(sys.argv[2])
    ops = sys.argv[3].split(",")
    sizes = [int(x) for x in sys.argv[4].split(",")]
    mp.spawn(run, args=(world, port, ops, sizes), nprocs=world, join=True)


if __name__ == "__main__":
    main()
