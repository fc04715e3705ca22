"""The rank's device mesh as a script gives it (issue 34): which of its process groups is the
data-, tensor- or pipeline-parallel dimension, read from a dict of groups or from a torch
DeviceMesh's dimension names and checked, with this rank's coordinates. The reporter labels each
communication event with the dimension of its group; it builds no groups itself.
"""

DIMENSIONS = ("dp", "tp", "pp")  # engine/spec/mesh_layout.h's names, in the hello's order
WORLD_DIM = "world"  # the dimension of an operation on the default group (kWorldDim)

_USAGE = ("a dict of dimension name to process group ({'dp': dp_group, 'tp': tp_group, "
          "'pp': pp_group}, each from torch.distributed.new_group) or a DeviceMesh with "
          "mesh_dim_names among 'dp', 'tp', 'pp'")


class Mesh:
    """The dimensions a rank's groups stand for. sizes and coords hold all three dimensions: one
    the script left out has one rank, and this rank's coordinate in it is 0; in a given one, the
    coordinate is the rank's rank in the group."""

    def __init__(self, groups, sizes, coords):
        self.groups = groups  # dimension name -> torch ProcessGroup, as given
        self.sizes = sizes
        self.coords = coords

    def dim_of(self, group):
        """The dimension `group` is, or None when it is none of the mesh's."""
        for name, member in self.groups.items():
            if member is group:
                return name
        return None

    def hello_fields(self):
        return {"mesh": dict(self.sizes), "coords": dict(self.coords)}

    def same_groups(self, other):
        return (self.groups.keys() == other.groups.keys() and
                all(self.groups[name] is other.groups[name] for name in self.groups))


def read_mesh(torch, mesh, caller):
    """The Mesh `mesh` describes: a dict {"dp": group, "tp": group, "pp": group} (any of them) or
    a DeviceMesh (whose mesh_dim_names name them). Raises TypeError or ValueError, naming
    `caller` ("watch_distributed") and the dimension, for anything else: a mesh of another type,
    a dimension name other than dp, tp, pp, a value that is no process group, a group this rank is
    not a member of, one group under two names, or sizes whose product is not the world size."""
    where = "ringmaster.%s(mesh=...)" % caller
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available():
        raise ValueError("%s: this torch has no torch.distributed" % where)
    groups = _named_groups(mesh, where)
    c10d = dist.distributed_c10d
    if not dist.is_initialized():
        raise ValueError("%s: torch.distributed is not initialized: call "
                         "init_process_group before giving the mesh" % where)
    for name, group in groups.items():
        _check_group(dist, c10d, name, group, where)
    seen = {}
    for name, group in groups.items():
        if id(group) in seen:
            raise ValueError("%s: mesh[%r] and mesh[%r] are the same process group: each "
                             "dimension needs its own, which names its operations"
                             % (where, seen[id(group)], name))
        seen[id(group)] = name
    sizes = {name: 1 for name in DIMENSIONS}
    coords = {name: 0 for name in DIMENSIONS}
    for name, group in groups.items():
        sizes[name] = dist.get_world_size(group)
        coords[name] = dist.get_rank(group)
    product = sizes["dp"] * sizes["tp"] * sizes["pp"]
    world = dist.get_world_size()
    if product != world:
        raise ValueError("%s: dp %d x tp %d x pp %d makes %d, but the world has %d ranks: "
                         "every dimension of more than one rank needs its group"
                         % (where, sizes["dp"], sizes["tp"], sizes["pp"], product, world))
    return Mesh(groups, sizes, coords)


def _named_groups(mesh, where):
    """{dimension name: group} from a dict or a DeviceMesh, the names checked."""
    if isinstance(mesh, dict):
        groups = dict(mesh)
    elif hasattr(mesh, "mesh_dim_names") and hasattr(mesh, "get_group"):
        names = mesh.mesh_dim_names
        if not names:
            raise ValueError("%s: a DeviceMesh without dimension names: build it with "
                             "mesh_dim_names=('dp', 'tp', ...), or pass a dict of its groups"
                             % where)
        _check_names(names, where)
        groups = {name: mesh.get_group(name) for name in names}
    else:
        raise TypeError("%s: a %s; the mesh is %s" % (where, type(mesh).__name__, _USAGE))
    _check_names(groups, where)
    return groups


def _check_names(names, where):
    for name in names:
        if name not in DIMENSIONS:
            raise ValueError("%s: unknown dimension %r: the dimensions are 'dp', 'tp' and 'pp' "
                             "(a DeviceMesh of other names: pass a dict of its groups under "
                             "these names)" % (where, name))


def _check_group(dist, c10d, name, group, where):
    # What new_group gives a rank outside the group: an object() in torch 1.13, -100 in 2.x.
    outside = c10d.GroupMember.NON_GROUP_MEMBER
    if type(group) is type(outside) and group == outside:
        raise ValueError("%s: mesh[%r]: this rank (%d) is not a member of that group: give each "
                         "rank the groups it belongs to" % (where, name, dist.get_rank()))
    if not isinstance(group, dist.ProcessGroup):
        raise TypeError("%s: mesh[%r] is a %s, not a process group (torch.distributed.new_group's;"
                        " dist.group.WORLD for the default group)"
                        % (where, name, type(group).__name__))
