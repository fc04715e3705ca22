"""Reporter test script (issue 34): two ranks over Gloo give ringmaster meshes it must refuse, and
print one line per refusal, `<case>: <exception type>: <message>` (a mesh taken prints
`<case>: taken`). Then a valid mesh, {"dp": dist.group.WORLD}, goes to init(); an all_reduce on
the default group is then the dp dimension's; and a second mesh of other groups is refused.
Every refusal happens before init() (or, the last, after it), with or without a telemetry channel.
"""
import torch
import torch.distributed as dist

import ringmaster


def attempt(case, call, mesh):
    try:
        call(mesh=mesh)
        print("%s: taken" % case, flush=True)
    except (TypeError, ValueError) as e:
        print("%s: %s: %s" % (case, type(e).__name__, e), flush=True)


class StandInDeviceMesh:
    """What the reporter reads of a torch DeviceMesh (torch 2.2 and later, which Debian's 1.13
    lacks): its dimension names and each one's group."""

    def __init__(self, names, group):
        self.mesh_dim_names = names
        self._group = group

    def get_group(self, name):
        return self._group


attempt("before init_process_group", ringmaster.watch_distributed, {})
dist.init_process_group("gloo")
rank = dist.get_rank()
world = dist.group.WORLD
first_only = dist.new_group([0])
everyone = dist.new_group([0, 1])
own = [dist.new_group([r]) for r in range(2)][rank]

attempt("a list", ringmaster.watch_distributed, [world])
attempt("unknown dimension", ringmaster.init, {"dp": world, "ep": own})
attempt("an int dimension", ringmaster.watch_distributed, {0: world})
attempt("a string group", ringmaster.watch_distributed, {"dp": "dp_group"})
attempt("a None group", ringmaster.init, {"tp": None})
attempt("not a member", ringmaster.watch_distributed, {"dp": first_only} if rank == 1 else {})
attempt("one group twice", ringmaster.watch_distributed, {"dp": world, "tp": world})
attempt("product short of the world", ringmaster.watch_distributed, {"tp": own})
attempt("product past the world", ringmaster.watch_distributed, {"dp": world, "tp": everyone})
attempt("a device mesh without names", ringmaster.watch_distributed,
        StandInDeviceMesh(None, world))
attempt("a device mesh of other names", ringmaster.watch_distributed,
        StandInDeviceMesh(("dp_shard", "cp"), world))

attempt("dp as the world", ringmaster.init, {"dp": world})
ringmaster.watch_distributed()
dist.all_reduce(torch.ones(7))
attempt("a second mesh", ringmaster.watch_distributed, {"dp": everyone})
attempt("the same mesh again", ringmaster.watch_distributed, {"dp": world})
dist.all_reduce(torch.ones(9), group=everyone)
dist.destroy_process_group()
