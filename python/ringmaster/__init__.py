"""Ringmaster's reporter: a PyTorch training script's telemetry for the Ringmaster desktop.

    import ringmaster

    ringmaster.init(optimizer)                     # hello; error, exit and SIGTERM hooks
    ringmaster.watch_distributed()                 # a comm event per torch.distributed call
    model = ringmaster.watch_ddp(DistributedDataParallel(net))   # DDP's gradient buckets
    for step in range(1, steps + 1):
        ...
        ringmaster.log(step, loss=loss, samples=batch_size)

A script with its own 3-D layout names its groups' dimensions, which label its communication:
init(optimizer, mesh={"dp": dp_group, "tp": tp_group, "pp": pp_group}) or a DeviceMesh with
mesh_dim_names ("dp", "tp", "pp"); see watch_distributed.

The events follow Ringmaster's telemetry protocol (docs/telemetry.md): one JSON line each on the
file descriptor the node agent names in RINGMASTER_TELEMETRY_FD, a channel of its own, so that the
script's prints (which the agent turns into log lines) never corrupt it. A background thread
writes them; a training step only queues.

Without RINGMASTER_TELEMETRY_FD (plain `python`, plain `torchrun`) every function here is a cheap
no-op that returns at once, so the same script runs anywhere.

Depends on the standard library only; torch is imported by init(), and nothing at all when
reporting is off. Written for torch 1.13 through 2.x.
"""

import os
import sys

__version__ = "0.1.0"  # Ringmaster's version (the top-level CMakeLists.txt), hello's fallback

# ACCEPTED_METRICS: the step event's own fields log() takes by name besides the loss (any other
# numeric name is a custom metric).
from ._reporter import ACCEPTED_METRICS, Environment, Reporter  # noqa: E402

__all__ = ["init", "log", "watch_distributed", "watch_ddp", "enabled", "ACCEPTED_METRICS"]

_active_reporter = None  # the Reporter of this process, once init() found a telemetry channel
_initialized = False  # init() ran (with or without a channel)
_rank_mesh = None  # the mesh the script gave (_mesh.Mesh), checked, with or without a channel


def _take_mesh(mesh, caller):
    """Checks the script's mesh (raising TypeError or ValueError, channel or not, so that a
    mistake shows under plain torchrun too) and keeps it; a rank has one mesh."""
    global _rank_mesh
    if mesh is None:
        return
    import torch

    from . import _mesh
    given = _mesh.read_mesh(torch, mesh, caller)
    if _rank_mesh is not None and not _rank_mesh.same_groups(given):
        raise ValueError("ringmaster.%s(mesh=...): a mesh of other groups was given before: a "
                         "rank has one mesh" % caller)
    if _rank_mesh is None:
        _rank_mesh = given


def init(optimizer=None, *, mesh=None, flight_recorder_size=1024, device=None,
         drain_timeout=10.0):
    """Starts reporting and sends this rank's `hello`; returns whether telemetry is on.

    optimizer: a torch.optim optimizer whose param_groups[0]["lr"] each step reports (or pass
        lr= to log()). A later init(optimizer) replaces it; nothing else happens twice.
    mesh: the rank's device mesh, as watch_distributed takes it, so that the hello carries it
        (the layout's sizes and this rank's coordinates). Checked even without a channel.
    flight_recorder_size: how many of the last communication operations the flight recorder
        keeps for an `error` event (the engine's default, 1024).
    device: what the rank reports and measures memory on ("cuda:1", a torch.device, "cpu");
        None: cuda:<LOCAL_RANK> when torch sees a GPU, else cpu.
    drain_timeout: seconds the exit waits for the queued events to be written.

    The hello carries RANK, WORLD_SIZE and LOCAL_RANK (torchrun's environment), the host, the
    process id, the device, its name (the GPU's, or the CPU model) and total memory (0 on CPU),
    RINGMASTER_VERSION, RINGMASTER_RUN_ID, RINGMASTER_STRATEGY (default: ddp for several ranks,
    else single) and RINGMASTER_ATTEMPT (default TORCHELASTIC_RESTART_COUNT, the agent's restart count, else 0),
    and, when the mesh is known (given here or to a watch_distributed before), "mesh" (the sizes
    of dp, tp and pp) and "coords" (this rank's place in each: its rank in the group).

    It also installs, chained to what was there:
    - sys.excepthook: an uncaught exception sends `error` (its traceback as the message, the last
      step, the flight recorder) then `done` failed; the exit status stays Python's (1);
    - threading.excepthook: an exception that ends another thread sends `error` with fatal false
      (the process goes on, so no `done`);
    - atexit: `done` completed with the last step and the seconds since the hello, then the queued
      events are written (at most drain_timeout seconds);
    - for SIGTERM and SIGINT, only where the script left Python's default: the run stops where it
      is, with SystemExit(130) (the engine worker's status when stopped), and `done` cancelled.

    A script that ends with sys.exit(N), N != 0, still reports `done` completed: Python does not
    tell an exit handler the status; the agent sees the exit code.
    """
    global _active_reporter, _initialized
    _take_mesh(mesh, "init")
    if _active_reporter is not None:
        if optimizer is not None:
            _active_reporter.set_optimizer(optimizer)
        if _rank_mesh is not None:
            _active_reporter.set_mesh(_rank_mesh)
        return True
    _initialized = True
    fd_text = os.environ.get("RINGMASTER_TELEMETRY_FD")
    if not fd_text:
        return False
    try:
        fd = int(fd_text)
        os.fstat(fd)
        environment = Environment(os.environ)
    except (ValueError, OSError) as e:
        print("ringmaster: telemetry off: RINGMASTER_TELEMETRY_FD=%s: %s" % (fd_text, e),
              file=sys.stderr, flush=True)
        return False
    # Neither the programs this script starts nor their children write to the channel: they do
    # not inherit it, nor the variable naming it.
    os.set_inheritable(fd, False)
    del os.environ["RINGMASTER_TELEMETRY_FD"]
    try:
        _active_reporter = Reporter(fd, environment, optimizer, flight_recorder_size, device,
                                    drain_timeout, _rank_mesh)
    except Exception as e:  # the script runs on without telemetry, never stopped by it
        print("ringmaster: telemetry off: the reporter could not start: %s: %s"
              % (type(e).__name__, e), file=sys.stderr, flush=True)
        return False
    return True


def enabled():
    """Whether init() found a telemetry channel (RINGMASTER_TELEMETRY_FD)."""
    return _active_reporter is not None


def _active():
    """The reporter, started by the first call when the script did not call init()."""
    if _active_reporter is None and not _initialized:
        init()
    return _active_reporter


def log(step, loss=None, **metrics):
    """Reports one completed optimizer step (a `step` event); never raises into the training loop.

    step: the optimizer steps completed, counted from 1.
    loss: this rank's training loss (a number or a one-element tensor); None, NaN or infinite
        are sent as null.
    metrics: any of ACCEPTED_METRICS: lr (default: the init() optimizer's param_groups[0]["lr"]
        when log() is called: after a scheduler's step() that is the next step's rate, so pass
        lr= to report the step's own),
        samples (this rank's samples in the step; 0, with a warning, when not given), tokens
        (tokens_per_s then
        follows from the step time unless given), skipped, accuracy (in [0, 1]), grad_norm,
        tokens_per_s, mfu, loss_scale; a value outside its field's domain is left out with one
        `log` warning per name. Any other name is a custom metric, as wandb.log takes it
        ("train/grad_norm", "eval/acc", "my_custom_thing"): a number or one-element tensor,
        stored as a series of its own when the name is within the bounds of docs/telemetry.md
        ("Custom metrics": 128 bytes of [A-Za-z0-9_./-], not starting with '/', 256 names a run;
        the recorder refuses the others, and non-finite values, with a counted warning). A value
        that is no number is left out with one `log` warning per name.

    Measured here: step_ms, the wall time since the previous log() (the first: since init());
    comm_ms, the time of the watched operations that completed in that interval;
    exposed_comm_ms, the part the training thread waited for (blocking calls in full, DDP's wait
    for its last buckets after the backward); compute_ms = step_ms - exposed_comm_ms; and memory:
    on a GPU torch.cuda's memory_allocated, max_memory_allocated (reset each step),
    memory_reserved and the device's used memory; on the host the process's resident bytes
    (/proc/self/statm) and its resident peak during the step. On a GPU, log() waits for the
    device to reach the step's watched operations, to read their CUDA events.
    """
    reporter = _active()
    if reporter is None:
        return
    try:
        reporter.log(step, loss, metrics)
    except Exception as e:  # a reporter bug must not stop the training
        reporter.warn("log-failed", "log() failed, its step not reported: %s: %s"
                      % (type(e).__name__, e))


def watch_distributed(mesh=None):
    """Sends a `comm` event for every torch.distributed collective and point-to-point call from
    now on: all_reduce, broadcast, reduce, all_gather, all_gather_into_tensor / _all_gather_base,
    reduce_scatter, reduce_scatter_tensor / _reduce_scatter_base, all_to_all, all_to_all_single,
    gather, scatter, barrier, send, recv, isend, irecv (those the running torch has; one warning
    names the others). Each carries seq_op (per group, collectives and point-to-point counted
    apart, as the engine's communicator), op, group ("world" for the default group, "group<N>"
    for torch's N-th), bytes as nccl-tests counts them, dtype, duration_ms (host clock; CUDA
    events for GPU tensors), algbw / busbw as the engine computes them, and the step being run
    (the last logged + 1). An async_op=True call is timed to its completion (its future's), or,
    where the backend's Work has no future (torch 1.13's Gloo isend / irecv), to the return of
    its wait(). Every call also enters the flight recorder.

    Calls are found through the module attributes: call dist.all_reduce(...), or import names
    from torch.distributed after this. Calls of ranks outside the group are not recorded (torch
    does nothing for them); seq_op counts the operations the reporter saw, not those torch's C++
    makes by itself (DDP's, FSDP's in 2.x).

    mesh: the rank's device mesh, whose dimension each comm event names in "dim" (issue 34):
        a dict of this rank's process groups by dimension, {"dp": dp_group, "tp": tp_group,
        "pp": pp_group} (any of the three; one left out has one rank), or a torch DeviceMesh
        (torch.distributed.device_mesh, torch 2.2 and later) built with mesh_dim_names among
        "dp", "tp", "pp". An operation on a mesh group carries that dimension (the default
        group too, when the mesh names it: pure data parallelism's {"dp": dist.group.WORLD});
        one on the default group otherwise "world"; one on any other group no dim. The hello
        carries the mesh's sizes and this rank's coordinates (its rank in each group) when the
        mesh came before it: pass it to init(mesh=...), or call this before init(); a mesh
        given after the hello labels the operations from then on, and says once that the run
        has no coordinates. Raises, with or without a channel, TypeError for a mesh that is no
        dict or DeviceMesh, or a value that is no process group, and ValueError for a dimension
        other than dp, tp, pp, a group this rank is not a member of, one group named twice,
        sizes whose product is not the world size, or a second mesh of other groups.
    """
    _take_mesh(mesh, "watch_distributed")
    reporter = _active()
    if reporter is not None:
        reporter.watch_distributed(_rank_mesh)


def watch_ddp(ddp_model):
    """Times DistributedDataParallel's gradient all-reduces and returns the model.

    Registers a communication hook (register_comm_hook, so call this before the first backward,
    on a model without a hook of its own) that runs DDP's default all-reduce
    (default_hooks.allreduce_hook) and sends a `comm` event per gradient bucket: an all_reduce of
    the DDP's group, its bytes the bucket's buffer, its duration from the hook's call to the
    all-reduce's completion (host clock on CPU, CUDA events on the GPU).

    The step's exposed communication counts, of each backward pass, the time from the call of the
    bucket DDP reports last (GradBucket.is_last: the backward's last gradients are ready) to the
    completion of its last bucket, which the training thread waits for; the buckets before
    overlap the backward and count only in comm_ms.
    """
    reporter = _active()
    if reporter is None:
        return ddp_model
    return reporter.watch_ddp(ddp_model)
