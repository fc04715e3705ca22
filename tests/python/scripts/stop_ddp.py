"""Reporter test script: a DDP run over Gloo, watched by watch_distributed and watch_ddp, logging
a step at a time until stopped (at most 2,000 steps). A SIGTERM reaching a rank, often in the
middle of a backward with gradient buckets in flight, must end its stream with done cancelled."""
import torch
import torch.distributed as dist

import ringmaster

torch.set_num_threads(1)
dist.init_process_group("gloo")
net = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512))
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
ringmaster.init(optimizer)
ringmaster.watch_distributed()
model = ringmaster.watch_ddp(torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.25))
for step in range(1, 2001):
    loss = model(torch.randn(64, 64)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ringmaster.log(step, loss=loss, samples=64)
