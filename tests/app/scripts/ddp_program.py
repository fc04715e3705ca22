"""Test script for program jobs: one rank of a PyTorch DDP run over Gloo, launched by Ringmaster's
node agent, reporting through the `ringmaster` package. Each step prints a line on stdout and one on
stderr that look like telemetry (they must arrive as logs). --fail-rank R --fail-step S: rank R
raises RuntimeError in step S, after its backward; --step-sleep: seconds each step sleeps (so a
test can cancel or kill it mid-run); --no-samples: log() the loss without samples= (as many scripts
do). It starts by printing where it runs and what lies beside it.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

import ringmaster

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-step", type=int, default=0)
parser.add_argument("--step-sleep", type=float, default=0.0)
parser.add_argument("--no-samples", action="store_true")
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
here = os.path.dirname(os.path.abspath(__file__))
print("rank %d runs %s beside %s" % (rank, os.path.abspath(__file__), sorted(os.listdir(here))))
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
ringmaster.init(optimizer)
ringmaster.watch_distributed()
model = ringmaster.watch_ddp(torch.nn.parallel.DistributedDataParallel(net))
generator = torch.Generator().manual_seed(rank)


def check_inputs(step):
    if rank == args.fail_rank and step == args.fail_step:
        raise RuntimeError("rank %d found a bad batch at step %d" % (rank, step))


for step in range(1, args.steps + 1):
    x = torch.randn(16, 32, generator=generator)
    y = torch.randint(0, 4, (16,), generator=generator)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    check_inputs(step)
    optimizer.step()
    dist.all_reduce(torch.tensor([loss.item()]))
    print('{"v":1,"type":"step","rank":%d,"seq":1,"t":1,"step":%d}' % (rank, step), flush=True)
    print("rank %d step %d on stderr" % (rank, step), file=sys.stderr, flush=True)
    if args.no_samples:
        ringmaster.log(step, loss=loss)
    else:
        ringmaster.log(step, loss=loss, samples=16)
    time.sleep(args.step_sleep)
