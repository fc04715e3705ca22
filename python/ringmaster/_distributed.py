"""torch.distributed under watch: wrappers of its collective and point-to-point functions, and a
DDP communication hook, that record every operation in the comm ledger (_comm.py).

Version differences (torch 1.13 to 2.x) are told by what exists, never by the version string:
functions missing from the running torch are left out, arguments are read by name through each
function's signature, and a Work without a future (1.13's Gloo send / recv) is timed to the
return of its wait(). Each missing feature is said once, as a `log` event of level warn.
"""

import functools
import inspect
import os
import threading

from . import _mesh

# Whether the calling thread is inside a watched operation: the torch.distributed calls it makes
# itself (all_gather_object's all_gather, 2.x's _all_gather_base calling all_gather_into_tensor,
# the default DDP hook's all_reduce) are part of it, not operations of their own.
_inside = threading.local()


class _Inside:
    def __enter__(self):
        _inside.depth = getattr(_inside, "depth", 0) + 1

    def __exit__(self, *exc):
        _inside.depth -= 1


def _nbytes(tensor):
    return tensor.numel() * tensor.element_size()


def _total_nbytes(tensors):
    return sum(_nbytes(t) for t in tensors)


def dtype_name(dtype):
    """The protocol's spelling of a torch dtype: "float32", "bfloat16", "int64", ..."""
    return str(dtype).rpartition(".")[2]


def _argument_reader(function):
    """read(args, kwargs): a call's arguments by parameter name, defaults filled in; what
    inspect's bind gives for these plain signatures, in a microsecond instead of twenty."""
    parameters = list(inspect.signature(function).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        signature = inspect.signature(function)

        def read_bound(args, kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return bound.arguments

        return read_bound
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY,
                                                          p.POSITIONAL_OR_KEYWORD)]
    defaults = {p.name: p.default for p in parameters if p.default is not p.empty}

    def read(args, kwargs):
        if len(args) > len(positional):
            raise TypeError("%d positional arguments, the function takes %d"
                            % (len(args), len(positional)))
        values = dict(defaults)
        values.update(zip(positional, args))
        values.update(kwargs)
        return values

    return read


def _rooted_peer(args, name):
    root = args.get(name)
    return root if isinstance(root, int) else -1


# What each watched function does, in the engine's terms: its op, and from its arguments (by name)
# and the group's size, (bytes as nccl-tests counts them, the tensor that gives the dtype, peer).
# Bytes follow engine/comm/communicator_ops.cpp: the per-rank buffer for all_reduce, broadcast and
# reduce, the whole output for all_gather, the whole input for reduce_scatter and all_to_all, n
# times the per-rank part for gather and scatter; 0 for barrier.
_OPS = {
    "all_reduce": ("all_reduce", lambda a, n: (_nbytes(a["tensor"]), a["tensor"], -1)),
    "broadcast": ("broadcast",
                  lambda a, n: (_nbytes(a["tensor"]), a["tensor"], _rooted_peer(a, "src"))),
    "reduce": ("reduce",
               lambda a, n: (_nbytes(a["tensor"]), a["tensor"], _rooted_peer(a, "dst"))),
    "all_gather": ("all_gather",
                   lambda a, n: (_total_nbytes(a["tensor_list"]), a["tensor"], -1)),
    "all_gather_into_tensor": ("all_gather", lambda a, n: (
        _nbytes(a["output_tensor"]), a["input_tensor"], -1)),
    "_all_gather_base": ("all_gather", lambda a, n: (
        _nbytes(a["output_tensor"]), a["input_tensor"], -1)),
    "reduce_scatter": ("reduce_scatter",
                       lambda a, n: (_total_nbytes(a["input_list"]), a["output"], -1)),
    "reduce_scatter_tensor": ("reduce_scatter",
                              lambda a, n: (_nbytes(a["input"]), a["output"], -1)),
    "_reduce_scatter_base": ("reduce_scatter",
                             lambda a, n: (_nbytes(a["input"]), a["output"], -1)),
    "all_to_all": ("all_to_all", lambda a, n: (
        _total_nbytes(a["input_tensor_list"]), a["input_tensor_list"][0], -1)),
    "all_to_all_single": ("all_to_all", lambda a, n: (_nbytes(a["input"]), a["input"], -1)),
    "gather": ("gather",
               lambda a, n: (_nbytes(a["tensor"]) * n, a["tensor"], _rooted_peer(a, "dst"))),
    "scatter": ("scatter",
                lambda a, n: (_nbytes(a["tensor"]) * n, a["tensor"], _rooted_peer(a, "src"))),
    "barrier": ("barrier", lambda a, n: (0, None, -1)),
    "send": ("send", lambda a, n: (_nbytes(a["tensor"]), a["tensor"], _rooted_peer(a, "dst"))),
    "recv": ("recv", lambda a, n: (_nbytes(a["tensor"]), a["tensor"], _rooted_peer(a, "src"))),
    "isend": ("send", lambda a, n: (_nbytes(a["tensor"]), a["tensor"], _rooted_peer(a, "dst"))),
    "irecv": ("recv", lambda a, n: (_nbytes(a["tensor"]), a["tensor"], _rooted_peer(a, "src"))),
}
_ALWAYS_ASYNC = frozenset(("isend", "irecv"))


class Groups:
    """Process groups by the names the events carry: "world" for the default group, "group<N>"
    for torch's N-th group (its name in torch, the same on every rank), their sizes, and their
    mesh dimensions: the one the script's mesh names the group by (_mesh.Mesh, even for the
    default group), else "world" for the default group, else none."""

    def __init__(self, c10d):
        self._c10d = c10d
        # id(group) -> (group, (name, size, dim)); the group is kept so that its id stays its own.
        self._known = {}
        self._mesh = None  # the script's _mesh.Mesh, once given

    def set_mesh(self, mesh):
        """Names the groups' dimensions by `mesh` from now on."""
        self._mesh = mesh
        for key, (group, (name, size, _)) in list(self._known.items()):
            self._known[key] = (group, (name, size, self._dim(group)))

    def describe(self, group):
        """(name, size, dim) of `group` (None: the default group), or None when this rank is not
        a member, where torch does nothing; dim None: the group is no dimension."""
        c10d = self._c10d
        if group is None or group is c10d.GroupMember.WORLD:
            group = c10d._get_default_group()
        known = self._known.get(id(group))
        if known is not None and known[0] is group:
            return known[1]
        if c10d._rank_not_in_group(group):
            return None
        if group is c10d._get_default_group():
            name = "world"
        else:
            names = getattr(getattr(c10d, "_world", None), "pg_names", None)
            if names is None:
                names = getattr(c10d, "_pg_names", {})
            torch_name = str(names.get(group, len(self._known)))
            name = "group" + torch_name if torch_name.isdigit() else torch_name
        described = (name, c10d.get_world_size(group), self._dim(group))
        self._known[id(group)] = (group, described)
        return described

    def _dim(self, group):
        dim = self._mesh.dim_of(group) if self._mesh is not None else None
        if dim is None and group is self._c10d._get_default_group():
            dim = _mesh.WORLD_DIM
        return dim


class DistributedWatch:
    """Wraps torch.distributed's functions so that each call is recorded in `ledger`."""

    def __init__(self, torch, ledger, warn, owner_pid):
        self._torch = torch
        self._ledger = ledger
        self._warn = warn  # warn(key, message): one warn log event per key
        self._owner_pid = owner_pid
        self._c10d = torch.distributed.distributed_c10d
        self.groups = Groups(self._c10d)
        self._waiting = {}  # id(work) -> (work, record): async works timed to their wait()
        self._patched_waits = {}  # Work class -> its own wait

    def install(self):
        """Replaces the functions in torch.distributed and torch.distributed.distributed_c10d
        (where the user's calls and torch's own composite calls look them up). Idempotent."""
        dist, c10d = self._torch.distributed, self._c10d
        missing = []
        for name, (op, describe) in _OPS.items():
            original = getattr(c10d, name, None) or getattr(dist, name, None)
            if original is None:
                missing.append(name)
                continue
            if getattr(original, "__ringmaster_watched__", False):
                continue
            wrapper = self._wrap(name, op, describe, original)
            for module in (dist, c10d):
                if getattr(module, name, None) is original:
                    setattr(module, name, wrapper)
        if missing:
            self._warn("missing-ops", "torch %s has no torch.distributed.%s: not watched"
                       % (self._torch.__version__, ", ".join(missing)))

    def _wrap(self, name, op, describe, original):
        read_arguments = _argument_reader(original)
        always_async = name in _ALWAYS_ASYNC

        @functools.wraps(original)
        def watched(*args, **kwargs):
            if getattr(_inside, "depth", 0) or os.getpid() != self._owner_pid:
                return original(*args, **kwargs)
            record = self._launch(name, op, describe, read_arguments, always_async, args,
                                  kwargs)
            if record is None:
                return original(*args, **kwargs)
            record, is_async = record
            try:
                with _Inside():
                    result = original(*args, **kwargs)
            except BaseException:
                self._ledger.fail(record)
                raise
            if is_async and result is not None:
                self._on_completion(name, result, record)
            else:
                self._ledger.complete(record)
            return result

        watched.__ringmaster_watched__ = True
        return watched

    def _launch(self, name, op, describe, read_arguments, always_async, args, kwargs):
        """The operation's record and whether the call is asynchronous, or None for a call that
        is not recorded (not a member of the group, arguments the reporter cannot read)."""
        try:
            bound = read_arguments(args, kwargs)
            group = self.groups.describe(bound.get("group"))
            if group is None:
                return None
            group_name, ranks, dim = group
            nbytes, tensor, peer = describe(bound, ranks)
            is_async = always_async or bool(bound.get("async_op", False))
            cuda_device = tensor.device if tensor is not None and tensor.is_cuda else None
            record = self._ledger.launch(
                op, group_name, ranks, int(nbytes),
                dtype_name(tensor.dtype) if tensor is not None else "uint8", peer,
                blocking=not is_async, cuda_device=cuda_device, dim=dim)
            return record, is_async
        except Exception as e:  # the call itself goes on, unrecorded; torch reports bad arguments
            self._warn("unreadable-" + name, "torch.distributed.%s: a call the reporter cannot "
                       "read (%s: %s) is not recorded" % (name, type(e).__name__, e))
            return None

    def _on_completion(self, name, work, record):
        """Completes `record` when `work` does: through its future where the backend has one,
        else when the script's wait() returns."""
        try:
            future = work.get_future()
        except (AttributeError, RuntimeError):
            future = None
        if future is not None:
            def done(finished):
                try:
                    finished.wait()
                except Exception:
                    self._ledger.fail(record)
                    return
                self._ledger.complete(record)
            if hasattr(future, "add_done_callback"):
                future.add_done_callback(done)
            else:
                future.then(done)
            return
        self._warn("no-future-" + name, "torch.distributed.%s: this backend's Work has no "
                   "future in torch %s: its duration ends when the script's wait() returns"
                   % (name, self._torch.__version__))
        self._time_to_wait(work, record)

    def _time_to_wait(self, work, record):
        cls = type(work)
        if cls not in self._patched_waits:
            original_wait = cls.wait
            waiting, ledger = self._waiting, self._ledger

            def wait(work_self, *args, **kwargs):
                pending = waiting.pop(id(work_self), None)
                if pending is not None and pending[0] is not work_self:
                    pending = None
                try:
                    result = original_wait(work_self, *args, **kwargs)
                except BaseException:
                    if pending is not None:
                        ledger.fail(pending[1])
                    raise
                if pending is not None:
                    ledger.complete(pending[1])
                return result

            cls.wait = wait
            self._patched_waits[cls] = original_wait
        if len(self._waiting) >= 4096:  # never waited for: they stay "started" in the recorder
            self._waiting.pop(next(iter(self._waiting)))
        self._waiting[id(work)] = (work, record)


class DdpCommHook:
    """A DDP communication hook: the default all-reduce (default_hooks.allreduce_hook, what DDP
    does without a hook) with each bucket recorded as an all_reduce of the DDP's group, its bytes
    the bucket's buffer, its time from the hook's call to the all-reduce's completion (host clock
    on CPU; CUDA events on the GPU). The bucket DDP reports as last (GradBucket.is_last) marks
    the end of the backward pass, from which the ledger counts the pass's exposed time."""

    def __init__(self, watch_groups, ledger, allreduce_hook, warn, owner_pid):
        # DDP names its hook in its logs, by these.
        self.__name__ = self.__qualname__ = "ringmaster_allreduce_hook"
        self._groups = watch_groups
        self._ledger = ledger
        self._allreduce_hook = allreduce_hook
        self._warn = warn
        self._owner_pid = owner_pid

    def __call__(self, process_group, bucket):
        record = None
        if os.getpid() == self._owner_pid:
            record = self._launch(process_group, bucket)
        with _Inside():
            future = self._allreduce_hook(process_group, bucket)
        if record is None:
            return future
        ledger = self._ledger

        def finished(done):
            try:
                reduced = done.value()
            except Exception:
                ledger.fail(record)
                raise
            ledger.complete(record)
            return reduced

        return future.then(finished)

    def _launch(self, process_group, bucket):
        try:
            buffer = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
            group = self._groups.describe(process_group)
            if group is None:
                return None
            is_last = bucket.is_last() if hasattr(bucket, "is_last") else None
            if is_last is None:
                self._warn("no-is-last", "torch's GradBucket has no is_last(): DDP's exposed "
                           "communication is not measured")
            group_name, ranks, dim = group
            return self._ledger.launch(
                "all_reduce", group_name, ranks, _nbytes(buffer), dtype_name(buffer.dtype),
                blocking=False, cuda_device=buffer.device if buffer.is_cuda else None,
                ddp_bucket=is_last, dim=dim)
        except Exception as e:
            self._warn("ddp-bucket", "a DDP bucket the reporter cannot read (%s: %s) is not "
                       "recorded" % (type(e).__name__, e))
            return None
