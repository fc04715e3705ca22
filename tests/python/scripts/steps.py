"""Reporter test script: a few optimizer steps of a small model on one rank, reported with
ringmaster.log. Step 2's loss is NaN, step 3 runs at half the learning rate, every step passes
custom metrics (a float, a tensor, an infinite value on step 2, and two values that are no number:
a string and a tensor of three elements),
and the script prints on stdout and stderr (a line that
looks like telemetry included). A forked child calls log(), which must send nothing. Ends by
printing "steps.py finished" on stdout.
"""
import os
import sys

import torch

import ringmaster

model = torch.nn.Linear(8, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
reporting = ringmaster.init(optimizer)
print('{"v":1,"type":"step","rank":0,"seq":1,"t":1,"printed":"on stdout"}', flush=True)
print("a line on stderr", file=sys.stderr, flush=True)

for step in range(1, 4):
    if step == 3:
        optimizer.param_groups[0]["lr"] = 0.025
    loss = model(torch.randn(16, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print("step %d loss %.4f" % (step, loss.item()), flush=True)
    custom = {"train/grad_norm": torch.tensor(0.5 * step),
              "eval/acc": float("inf") if step == 2 else 0.75,
              "not_a_number": "high", "many_elements": torch.ones(3)}
    ringmaster.log(step, loss=float("nan") if step == 2 else loss, samples=16, tokens=16,
                   accuracy=0.25, unknown_metric=1.5, **custom)

child = os.fork()
if child == 0:  # as a DataLoader worker would: the channel is its parent's
    ringmaster.log(99, loss=1.0, samples=1)
    os._exit(0)
os.waitpid(child, 0)
print("steps.py finished (reporting: %s)" % reporting, flush=True)
