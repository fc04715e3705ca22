"""Reporter test script: two ranks over Gloo log two steps, each with an all_reduce and a
broadcast; then rank 1 raises ValueError("boom after step 2") and rank 0 ends normally.
With --huge, the exception's message is 2 MB long (its error line must be cut to fit).
"""
import argparse

import torch
import torch.distributed as dist

import ringmaster

parser = argparse.ArgumentParser()
parser.add_argument("--huge", action="store_true")
args = parser.parse_args()

dist.init_process_group("gloo")
ringmaster.init()
ringmaster.watch_distributed()
for step in range(1, 3):
    dist.all_reduce(torch.ones(6))
    dist.broadcast(torch.zeros(4, dtype=torch.int64), src=0)
    ringmaster.log(step, loss=1.0 / step, lr=0.1, samples=4)


def fail():
    message = "boom after step 2"
    if args.huge:
        message += " " + "x" * (2 << 20)
    raise ValueError(message)


if dist.get_rank() == 1:
    fail()
