"""Reporter test script (issue 34): one rank of a dp x tp x pp layout over Gloo (--layout D,T,P;
the rank order of engine/spec/mesh_layout.h: tp fastest, then dp, then pp), its groups made with
new_group and given to ringmaster.init(mesh=...) by dimension; the dimensions of one rank are left
out. With --device-mesh, a DeviceMesh of ("dp", "tp") from init_device_mesh instead (torch 2.2
and later). --order says how the mesh reaches the reporter: init (init(mesh=...), then
watch_distributed()), watch-first (watch_distributed(mesh=...), then init()) or late (init(), so
the hello goes without the mesh, then watch_distributed() and an all-reduce of 11 float32 on the
dp group, which is no dimension yet, then watch_distributed(mesh=...)). Each rank then all-reduces a size of its own on each group, so that the test knows
each comm event's group by its bytes:

    tp: 3 float32 (12 bytes)   dp: 5 float32 (20)   pp: 6 float32 (24)
    the default group: 7 float32 (28) as group=None, 8 float32 (32) as group=dist.group.WORLD
    a group of every rank that is no dimension: 9 float32 (36)

and, with pp > 1, the first stage sends 4 int32 to the second over the pp group; with dp > 1, a
DistributedDataParallel over the dp group (watch_ddp) reduces 40 float32 of gradients in one
bucket (160 bytes).
"""
import argparse

import torch
import torch.distributed as dist

import ringmaster

parser = argparse.ArgumentParser()
parser.add_argument("--layout", default="2,2,1")
parser.add_argument("--device-mesh", action="store_true")
parser.add_argument("--order", choices=("init", "watch-first", "late"), default="init")
args = parser.parse_args()
D, T, P = (int(size) for size in args.layout.split(","))

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
assert dist.get_world_size() == D * T * P
tp, dp, pp = rank % T, rank // T % D, rank // (T * D)


def rank_of(t, d, p):
    return t + T * (d + D * p)


def own_group(members_of_each):
    """new_group for every group of a dimension (every rank makes them all, in one order); this
    rank's."""
    own = None
    for members in members_of_each:
        group = dist.new_group(members)
        if rank in members:
            own = group
    return own


if args.device_mesh:
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (D, T), mesh_dim_names=("dp", "tp"))
    groups = {"dp": mesh.get_group("dp"), "tp": mesh.get_group("tp")}
else:
    groups = {
        "tp": own_group([[rank_of(t, d, p) for t in range(T)]
                         for d in range(D) for p in range(P)]),
        "dp": own_group([[rank_of(t, d, p) for d in range(D)]
                         for t in range(T) for p in range(P)]),
        "pp": own_group([[rank_of(t, d, p) for p in range(P)]
                         for t in range(T) for d in range(D)]),
    }
    # A dimension of one rank is left out: the reporter counts it as one.
    mesh = {name: group for name, group in groups.items()
            if {"dp": D, "tp": T, "pp": P}[name] > 1}
everyone = dist.new_group(list(range(dist.get_world_size())))

if args.order == "init":
    ringmaster.init(mesh=mesh)
    ringmaster.watch_distributed()
elif args.order == "watch-first":
    ringmaster.watch_distributed(mesh=mesh)
    ringmaster.init()
else:  # an operation on the dp group before the mesh names it: no dim
    ringmaster.init()
    ringmaster.watch_distributed()
    dist.all_reduce(torch.ones(11), group=groups["dp"])
    ringmaster.watch_distributed(mesh=mesh)

for name, count in (("tp", 3), ("dp", 5), ("pp", 6)):
    if {"dp": D, "tp": T, "pp": P}[name] > 1:
        dist.all_reduce(torch.ones(count), group=groups[name])
dist.all_reduce(torch.ones(7))
dist.all_reduce(torch.ones(8), group=dist.group.WORLD)
dist.all_reduce(torch.ones(9), group=everyone)
if P > 1:
    if pp == 0:
        dist.send(torch.arange(4, dtype=torch.int32), rank_of(tp, dp, 1), group=groups["pp"])
    elif pp == 1:
        dist.recv(torch.empty(4, dtype=torch.int32), rank_of(tp, dp, 0), group=groups["pp"])
if D > 1:
    net = torch.nn.Linear(4, 8)  # 32 + 8 parameters
    model = ringmaster.watch_ddp(torch.nn.parallel.DistributedDataParallel(
        net, process_group=groups["dp"]))
    model(torch.ones(2, 4)).sum().backward()
ringmaster.log(1, loss=0.5, lr=0.1, samples=2)
dist.barrier()
dist.destroy_process_group()
