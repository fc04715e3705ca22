"""Reporter test script: one rank of a DistributedDataParallel run over Gloo (torchrun's
environment), watched by ringmaster.watch_ddp and ringmaster.watch_distributed. Each of the
--steps steps runs a backward whose gradients DDP reduces (1,069,312 bytes of float32 parameters:
one bucket at the first step, then two, a first one of 1 MiB as DDP's and 1 KB ones), then explicit
collectives: all_reduce of 1,000 float64, broadcast of 10 int64 from rank 0, all_gather of 5
float32 per rank, an async all_reduce of 7 float32, a ring of isend / irecv of 3 float32 (with
more than one rank) and a barrier. Prints on stdout and stderr as it goes. After the last step,
the even ranks all_reduce 3 int32 in a group of their own.
"""
import argparse
import sys

import torch
import torch.distributed as dist

import ringmaster

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4096))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
ringmaster.init(optimizer)
ringmaster.watch_distributed()
model = ringmaster.watch_ddp(torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.001))

for step in range(1, args.steps + 1):
    x = torch.randn(32, 16)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

    dist.all_reduce(torch.ones(1000, dtype=torch.float64))
    dist.broadcast(torch.arange(10), src=0)
    dist.all_gather([torch.empty(5) for _ in range(world)], torch.full((5,), float(rank)))
    work = dist.all_reduce(torch.ones(7), async_op=True)
    work.wait()
    if world > 1:
        sent = dist.isend(torch.full((3,), float(rank)), (rank + 1) % world)
        received = torch.empty(3)
        dist.irecv(received, (rank - 1) % world).wait()
        sent.wait()
        assert received[0].item() == (rank - 1) % world
    dist.barrier()
    print("rank %d step %d loss %.4f" % (rank, step, loss.item()), flush=True)
    print("rank %d stderr line" % rank, file=sys.stderr, flush=True)
    ringmaster.log(step, loss=loss, samples=32)

evens = dist.new_group(list(range(0, world, 2)))
if rank % 2 == 0:
    dist.all_reduce(torch.ones(3, dtype=torch.int32), group=evens)
dist.destroy_process_group()
