# The anchor of ddp_vs_torch.py: one rank of torch.nn.parallel.DistributedDataParallel over Gloo,
# training the same MLP shape (Linear + ReLU) with SGD on random data, batch per rank as given.
# Prints, on rank 0, one JSON line: {"samples_per_s": ...} over the steps after the warm-up.
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", required=True)  # "784,256,256,10"
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    a = p.parse_args()
    world = int(os.environ["WORLD_SIZE"])
    if world > 1:
        torch.set_num_threads(1)  # as torchrun's OMP_NUM_THREADS=1 for several local ranks
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    widths = [int(w) for w in a.layers.split(",")]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, widths[0])
    y = torch.randint(0, widths[-1], (a.batch,))
    for step in range(a.steps):
        if step == a.warmup:
            dist.barrier()
            start = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        samples = (a.steps - a.warmup) * a.batch * world
        print(json.dumps({"samples_per_s": samples / elapsed}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
