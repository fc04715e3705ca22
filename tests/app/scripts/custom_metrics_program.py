"""Test script for custom metrics (issue 33): one rank of a PyTorch run, launched by Ringmaster's
node agent, logging its own metrics with ringmaster.log as it would with wandb.log:
train/grad_norm (clip_grad_norm_'s norm) every step, eval/acc every second step, my_custom_thing
(rank * 1000 + step + --shift) every step. With --bounds it also logs, every step, a name past
each bound (129 bytes, a space, a leading '/', the name of a step series) and a NaN under nan/metric,
and at the last step 260 names extra/000 ... extra/259, past the run's limit of 256 names.
"""
import argparse
import os

import torch

import ringmaster

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--shift", type=float, default=0.0)
parser.add_argument("--bounds", action="store_true")
args = parser.parse_args()

torch.set_num_threads(1)
rank = int(os.environ.get("RANK", "0"))
torch.manual_seed(rank)
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
ringmaster.init(optimizer)

for step in range(1, args.steps + 1):
    inputs, targets = torch.randn(16, 16), torch.randint(0, 4, (16,))
    logits = net(inputs)
    loss = torch.nn.functional.cross_entropy(logits, targets)
    optimizer.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    optimizer.step()
    metrics = {"train/grad_norm": grad_norm, "my_custom_thing": rank * 1000 + step + args.shift}
    if step % 2 == 0:
        metrics["eval/acc"] = (logits.argmax(1) == targets).float().mean()
    if args.bounds:
        # wall_time_s: the name of a step series of storage's (the step event's own names,
        # "tokens_per_s", go to their fields).
        metrics.update({"n" * 129: 1.0, "has space": 1.0, "/leading": 1.0, "wall_time_s": 1.0,
                        "nan/metric": float("nan")})
        if step == args.steps:
            metrics.update({"extra/%03d" % i: float(i) for i in range(260)})
    ringmaster.log(step, loss=loss, samples=16, **metrics)
