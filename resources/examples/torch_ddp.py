"""A plain PyTorch DistributedDataParallel script that Ringmaster runs and watches: an MLP learns to
classify synthetic data labelled by a fixed random "teacher" network, one process per rank, Gloo
on the host or NCCL on GPUs (whichever torch sees).

Run it as any torchrun script (`torchrun --nproc-per-node 4 torch_ddp.py --steps 200`), as a
single process (`python3 torch_ddp.py`), or as a Ringmaster program job, whose agent gives it
RINGMASTER_TELEMETRY_FD: then the four ringmaster calls below send its steps, its collectives and
DDP's gradient buckets to the desktop. Elsewhere they do nothing.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ringmaster


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64, help="samples per rank and step")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--width", type=int, default=512, help="hidden layer width")
    parser.add_argument("--print-every", type=int, default=20)
    return parser.parse_args()


def make_mlp(inputs, width, classes):
    return nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, classes))


class TeacherData:
    """Endless batches of Gaussian inputs labelled by the argmax of a fixed random network: a task
    an MLP can learn, with no files to read. Each rank draws its own samples."""

    def __init__(self, inputs, classes, batch_size, rank, device):
        torch.manual_seed(1234)  # the same teacher on every rank
        self.teacher = make_mlp(inputs, 64, classes).to(device)
        self.generator = torch.Generator(device="cpu").manual_seed(rank)
        self.inputs, self.batch_size, self.device = inputs, batch_size, device

    def next(self):
        x = torch.randn(self.batch_size, self.inputs, generator=self.generator).to(self.device)
        with torch.no_grad():
            y = self.teacher(x).argmax(dim=1)
        return x, y


def main():
    args = parse_args()
    # A plain `python3 torch_ddp.py` is a world of one.
    for name, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"), ("RANK", "0"),
                        ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(name, value)
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    elif int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1:
        torch.set_num_threads(1)  # ranks sharing the host's cores, as torchrun's OMP_NUM_THREADS
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    inputs, classes = 32, 10
    data = TeacherData(inputs, classes, args.batch_size, rank, device)
    torch.manual_seed(0)  # DDP broadcasts rank 0's weights anyway
    model = make_mlp(inputs, args.width, classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)

    ringmaster.init(optimizer, device=device)
    ringmaster.watch_distributed()
    model = ringmaster.watch_ddp(nn.parallel.DistributedDataParallel(
        model, device_ids=[local_rank] if use_cuda else None))
    loss_fn = nn.CrossEntropyLoss()

    if rank == 0:
        print("training a %d-%d-%d-%d MLP on %d rank(s) (%s), %d samples per rank and step"
              % (inputs, args.width, args.width, classes, world, device.type, args.batch_size),
              flush=True)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = data.next()
        logits = model(x)
        loss = loss_fn(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        lr = optimizer.param_groups[0]["lr"]  # the rate this step ran at
        optimizer.step()
        scheduler.step()
        accuracy = (logits.argmax(dim=1) == y).float().mean().item()
        if step % args.print_every == 0 or step == args.steps:
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)  # the ranks' mean loss, for the line below
            if rank == 0:
                elapsed = time.perf_counter() - start
                print("step %4d/%d  loss %.4f  acc %5.1f%%  lr %.4f  %.0f samples/s"
                      % (step, args.steps, mean_loss.item() / world, 100 * accuracy, lr,
                         step * args.batch_size * world / elapsed), flush=True)
        ringmaster.log(step, loss=loss.item(), lr=lr, samples=args.batch_size,
                       tokens=args.batch_size, accuracy=accuracy, grad_norm=grad_norm)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
